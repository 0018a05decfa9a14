// Package e2b speaks E2B's API, so that the unmodified E2B SDKs (npm e2b,
// @e2b/code-interpreter; ../shared/E2B-COMPAT.md maps what they send) run
// against Hutch by changing environment variables only:
//
//   - the control plane (E2B_API_URL), served under a path prefix of the
//     API's listener, is a dialect of Hutch's own API: each call is
//     translated into calls of the Hutch API, made in-process with the
//     caller's key, so a key sees and may do exactly what it may through
//     Hutch's API (its workspace, its quotas, its network mode, the audit
//     log);
//   - the sandbox front (E2B_SANDBOX_URL), a listener of its own, routes
//     each request by the E2b-Sandbox-Id and E2b-Sandbox-Port headers, or
//     by a Host of <port>-<id>.<domain>, to the sandbox's agent (port
//     49983, envd's services and /files), to the code interpreter (port
//     49999, on Hutch's code contexts) or to any other port (previews).
//
// Keys: an E2B key is e2b_<hex> for the Hutch key hutch_<hex> (the SDKs
// of some versions check that shape). A sandbox's envd access token is
// derived from the daemon's key, the sandbox's id and the key it was
// given to (its name and when it was made): stable across pause and
// resume, as the SDK needs, kept nowhere, and dead with that key
// (keys.go).
package e2b

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

// Ports the SDKs address in a sandbox.
const (
	// EnvdPort is envd's: the agent's process and filesystem services and
	// /files.
	EnvdPort = 49983
	// InterpreterPort is the code interpreter's.
	InterpreterPort = 49999
)

// EnvdVersion is the envd version Hutch's agent answers as. The SDKs
// gate features on it (E2B-COMPAT.md §2): 0.6.1 has octet-stream uploads
// and closeStdin, and not file metadata nor watch entries, which the
// agent does not have: those then fail on the client instead of being
// dropped without a word.
const EnvdVersion = "0.6.1"

// Key prefixes: E2B's shape and Hutch's of the same key.
const (
	e2bKeyPrefix   = "e2b_"
	hutchKeyPrefix = "hutch_"
)

// E2BKey is the E2B form of Hutch key key ("" if key is not one).
func E2BKey(key string) string {
	hexPart, ok := strings.CutPrefix(key, hutchKeyPrefix)
	if !ok {
		return ""
	}
	return e2bKeyPrefix + hexPart
}

// hutchKey is the Hutch key an E2B key stands for; a key already in
// Hutch's shape is taken as it is.
func hutchKey(key string) string {
	if hexPart, ok := strings.CutPrefix(key, e2bKeyPrefix); ok {
		return hutchKeyPrefix + hexPart
	}
	return key
}

// tokens derives sandboxes' tokens from a secret of the daemon's.
type tokens struct{ secret []byte }

func newTokens(daemonKey string) tokens {
	mac := hmac.New(sha256.New, []byte(daemonKey))
	mac.Write([]byte("hutch e2b sandbox tokens"))
	return tokens{secret: mac.Sum(nil)}
}

// token is sandbox id's token of kind ("envd", "traffic") as given to
// holder h: a token is bound to the key that was given it (keys.go), so
// that it works no longer than that key does.
func (t tokens) token(kind, id string, h holder) string {
	mac := hmac.New(sha256.New, t.secret)
	mac.Write([]byte(kind + "\x00" + id + "\x00" + h.name + "\x00" + strconv.FormatInt(h.made, 10)))
	return hex.EncodeToString(mac.Sum(nil))
}
