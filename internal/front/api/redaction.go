package api

import "github.com/hutchdev/hutch/internal/base/redact"

// Redaction: no secret value the daemon knows of leaves in an answer.
// Every route's body passes through the redactor as it is written (see
// recorder): JSON results, error messages, tool and MCP results, files
// and downloads. A value is caught in its raw, JSON-escaped, base64,
// base64url, URL-encoded and hex forms, also when split across two
// writes. A directory's download is compressed, where this cannot see,
// so its files are redacted one by one before the daemon compresses it
// (internal/core/toolrun's archiveredact.go). Event streams of a command's
// output are redacted per stream before they are framed as events (see
// utf8Carry), since a value cut between two chunks lands in two events.
// Values shorter than 8 bytes are not redacted (internal/base/redact
// says why).

// responseRedaction is the redaction of one answer's body: nil when the
// daemon knows of no secret.
func (s *Server) responseRedaction() *redact.Stream {
	set := s.redactor.Set()
	if set.Len() == 0 {
		return nil
	}
	return set.Stream()
}
