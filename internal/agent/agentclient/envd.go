package agentclient

import (
	"net/http"

	"github.com/hutchdev/hutch/internal/agent/agentpb/filesystem/filesystemconnect"
	"github.com/hutchdev/hutch/internal/agent/agentpb/process/processconnect"
)

// Envd is the agent's envd API as it is, for a front that speaks envd's
// protocol to E2B's SDKs (internal/e2b) and passes their calls on: the
// clients of its process and filesystem services, whose errors are the
// agent's Connect errors (not this package's kinds), and a transport that
// carries requests for its HTTP routes (/files) to it.
type Envd struct {
	Process    processconnect.ProcessClient
	Filesystem filesystemconnect.FilesystemClient
	HTTP       http.RoundTripper
}

// Envd returns the agent's envd API as it is.
func (c *Client) Envd() Envd {
	return Envd{
		Process:    processconnect.NewProcessClient(c.http, baseURL),
		Filesystem: filesystemconnect.NewFilesystemClient(c.http, baseURL),
		HTTP:       c.transport,
	}
}

// BaseURL is the URL the agent's requests go to (the host is never
// resolved: the transport dials the agent).
const BaseURL = baseURL
