// Package redact replaces the secret values the daemon knows of by
// "[redacted:NAME]" in what the daemon sends out or logs: exec output (JSON
// and SSE), process logs, tool and MCP results, API error messages and the
// daemon's own slog records.
//
// Threat model. A user's secret (an API key, a password) is handed to a
// program in a sandbox, and that program — or an agent driving it — prints
// it, by mistake or on purpose, into output that reaches a log, a browser or
// a model's context. Redaction catches the common ways that happens: the
// value itself and the encodings tools apply without being asked to.
//
// What is caught, for every value of at least MinLen bytes:
//
//   - the raw value;
//   - base64, standard and URL alphabet, with and without "=" padding;
//   - base64 of the value inside a longer encoded stream, at each of the three
//     byte alignments (so `printf 'x%s' "$KEY" | base64` is caught too): only
//     the characters that depend on the value alone are matched, and the one
//     or two characters at each end that also encode the unknown neighbouring
//     bytes are left as they are;
//   - URL encoding, as url.QueryEscape and url.PathEscape write it;
//   - the body of a JSON string, as encoding/json writes it (with and without
//     HTML escaping);
//   - hexadecimal, lower and upper case.
//
// Matching is leftmost-longest and non-overlapping, and a Stream gives the
// same result however its input is cut into chunks, holding back only bytes
// that could still be the start of a secret.
//
// Values shorter than MinLen (8 bytes) are not redacted at all: a short value
// such as "abc" or "1234" occurs in ordinary output so often that replacing
// it would mangle that output, and would tell a reader the value anyway (the
// places it was cut out of).
//
// What redaction cannot promise. A program holding a secret can always
// transform it some other way — reverse it, split it across lines, encrypt it,
// print one character per second through a channel we do not watch — and no
// filter on output can catch every transformation. Redaction is a safety net
// against accidents, not the security boundary. The boundary is that secrets
// injected by the egress proxy never enter the sandbox at all; a secret that
// is handed to the sandbox must be assumed readable by whatever runs there.
// Other limits: a secret that is added after a Stream started is only seen
// by streams that follow a Redactor; text is matched as the daemon sees it, so
// redact before encoding (JSON, SSE framing), not after; and base64 wrapped
// over several lines is caught only in its pieces that are long enough.
package redact

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"
)

// MinLen is the shortest value that is redacted; see the package comment for
// why shorter ones are left alone.
const MinLen = 8

// Secret is a named secret value.
type Secret struct {
	Name  string // shown in place of the value: "[redacted:Name]"
	Value string
	// Replacement, when not empty, replaces every form of the value
	// instead of "[redacted:Name]": the egress proxy puts a proxy
	// secret's placeholder back where a host sent its value.
	Replacement string
}

// Set is a compiled, immutable set of secrets to redact. It is safe for
// concurrent use. A nil or zero Set redacts nothing.
type Set struct {
	count    int       // secrets with a value of at least MinLen bytes
	patterns []pattern // every form of every value, longest first

	// byFirst lists the patterns by their first byte, longest first, so
	// that the first one found at a position is the longest match there.
	byFirst [256][]*pattern
	// pairs has bit b0<<8|b1 set when some pattern starts with bytes b0 b1:
	// a quick test that rules out almost every position of ordinary text.
	pairs [1 << 16 / 64]uint64
}

// pattern is one form of one secret value.
type pattern struct {
	text string // what is matched; at least MinLen bytes
	repl string // what replaces it: "[redacted:NAME]"
}

// NewSet compiles secrets into a Set. Values shorter than MinLen are skipped.
// When two secrets share a value (or a form of one), the first one's name is
// used.
func NewSet(secrets []Secret) *Set {
	s := &Set{}
	seen := make(map[string]bool)
	for _, sec := range secrets {
		if len(sec.Value) < MinLen {
			continue
		}
		s.count++
		repl := "[redacted:" + sec.Name + "]"
		if sec.Replacement != "" {
			repl = sec.Replacement
		}
		for _, f := range forms(sec.Value) {
			if len(f) < MinLen || seen[f] {
				continue
			}
			seen[f] = true
			s.patterns = append(s.patterns, pattern{text: f, repl: repl})
		}
	}
	slices.SortStableFunc(s.patterns, func(a, b pattern) int {
		return cmp.Compare(len(b.text), len(a.text))
	})
	for i := range s.patterns {
		p := &s.patterns[i]
		s.byFirst[p.text[0]] = append(s.byFirst[p.text[0]], p)
		k := uint(p.text[0])<<8 | uint(p.text[1])
		s.pairs[k/64] |= 1 << (k % 64)
	}
	return s
}

// forms returns every form of v that is redacted, possibly with repeats.
func forms(v string) []string {
	b := []byte(v)
	out := []string{
		v,
		base64.StdEncoding.EncodeToString(b),
		base64.RawStdEncoding.EncodeToString(b),
		base64.URLEncoding.EncodeToString(b),
		base64.RawURLEncoding.EncodeToString(b),
	}
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		for offset := range 3 {
			out = append(out, base64Inner(enc, b, offset))
		}
	}
	out = append(out, url.QueryEscape(v), url.PathEscape(v))
	out = append(out, jsonForms(v)...)
	lower := hex.EncodeToString(b)
	out = append(out, lower, strings.ToUpper(lower))
	return out
}

// base64Inner returns the characters of the base64 of a stream in which b
// starts at byte offset (0, 1 or 2, modulo 3) that depend on b alone: each
// base64 character encodes 6 bits, and those that share bits with the
// unknown neighbouring bytes are dropped.
func base64Inner(enc *base64.Encoding, b []byte, offset int) string {
	buf := make([]byte, offset+len(b))
	copy(buf[offset:], b)
	e := enc.EncodeToString(buf)
	first := (8*offset + 5) / 6      // first character whose bits are all in b
	end := 8 * (offset + len(b)) / 6 // one past the last such character
	return e[first:end]
}

// jsonForms returns the body of the JSON string for v (without its quotes),
// as encoding/json writes it with and without HTML escaping. Values that are
// not valid UTF-8 are skipped: encoding/json would replace their bad bytes,
// and the raw form already covers what a program prints.
func jsonForms(v string) []string {
	if !utf8.ValidString(v) {
		return nil
	}
	var out []string
	for _, html := range []bool{true, false} {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(html)
		if err := enc.Encode(v); err != nil {
			continue // cannot happen for a string; skip the form if it does
		}
		body := strings.TrimSuffix(buf.String(), "\n")
		out = append(out, body[1:len(body)-1])
	}
	return out
}

// Len returns the number of secrets whose value is redacted (those of at
// least MinLen bytes). Callers may skip work when it is zero.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return s.count
}

// empty reports whether s redacts nothing.
func (s *Set) empty() bool {
	return s == nil || len(s.patterns) == 0
}

// String returns in with every form of every secret replaced. It returns in
// itself when there is nothing to replace.
func (s *Set) String(in string) string {
	if s.empty() {
		return in
	}
	at, p := find(s, in, 0, true)
	if p == nil {
		return in
	}
	var b strings.Builder
	b.Grow(len(in))
	i := 0
	for p != nil {
		b.WriteString(in[i:at])
		b.WriteString(p.repl)
		i = at + len(p.text)
		at, p = find(s, in, i, true)
	}
	b.WriteString(in[i:])
	return b.String()
}

// Bytes returns a copy of in with every form of every secret replaced.
func (s *Set) Bytes(in []byte) []byte {
	if in == nil {
		return nil
	}
	out, _ := s.appendRedacted(make([]byte, 0, len(in)), in, true)
	return out
}

// appendRedacted appends in, redacted, to dst. When final is false it stops
// at the first position from which in could still be the start of a longer
// match than the bytes present allow to decide, and returns that position as
// n; the caller keeps in[n:] for later. When final is true n is len(in).
func (s *Set) appendRedacted(dst, in []byte, final bool) (out []byte, n int) {
	if s.empty() {
		return append(dst, in...), len(in)
	}
	i := 0
	for {
		at, p := find(s, in, i, final)
		dst = append(dst, in[i:at]...)
		if p == nil {
			return dst, at
		}
		dst = append(dst, p.repl...)
		i = at + len(p.text)
	}
}

// text is what find scans: a string or a byte slice.
type text interface{ ~string | ~[]byte }

// find scans in from position from, left to right, for the leftmost-longest
// pattern. It returns:
//
//   - at, p with p non-nil: the longest pattern starting at at;
//   - at < len(in), p nil: only when final is false: in[at:] is a proper
//     prefix of some pattern, so what is at at cannot be decided yet;
//   - len(in), nil: nothing matches in in[from:].
//
// A position is decided only when no pattern longer than the rest of the
// input could still start there; so the result does not depend on where the
// input ends, as long as it is not final.
//
// This is a plain scan rather than Aho-Corasick: a Set has a few hundred
// patterns at most, the pairs filter passes over ordinary text at a few
// hundred MB/s, and the hold-back rule is obvious here. The cost per position
// is bounded by the candidates' lengths, so input built to repeat a long
// periodic value (such as "AAAA…") costs up to O(len(in) × longest form).
func find[T text](s *Set, in T, from int, final bool) (at int, p *pattern) {
	n := len(in)
	pairs := &s.pairs
	for i := from; i < n; i++ {
		if i+1 < n {
			k := uint(in[i])<<8 | uint(in[i+1])
			if pairs[k>>6]&(1<<(k&63)) == 0 {
				continue
			}
		}
		rest := in[i:]
		for _, c := range s.byFirst[in[i]] {
			if len(c.text) > len(rest) {
				if !final && c.text[:len(rest)] == string(rest) {
					return i, nil
				}
				continue
			}
			if string(rest[:len(c.text)]) == c.text {
				return i, c
			}
		}
	}
	return n, nil
}
