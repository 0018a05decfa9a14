package cluster

import (
	"crypto/sha256"
	"net/http"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/front/api"
	"github.com/hutchdev/hutch/internal/front/mcpserver"
)

// mcpPath is where MCP is served, as on a single box.
const mcpPath = "/mcp"

// mcpSessions serves MCP on an API replica: the tools a node serves
// (internal/front/mcpserver), acting through this replica's own API as the
// caller's key, so that each tool call reaches the node holding its
// sandbox, in the key's workspace and modes. Stateless, so that any
// replica answers any request of a session: a load balancer in front
// needs no affinity.
type mcpSessions struct {
	self    string // this replica's API, as it reaches itself
	version string

	mu       sync.Mutex
	handlers map[[sha256.Size]byte]http.Handler // by the key's hash
}

func (m *mcpSessions) ServeHTTP(w http.ResponseWriter, r *http.Request, rt *Router) {
	key, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	h, err := m.handler(r, key)
	if err != nil {
		api.WriteError(w, r, rt.log, err)
		return
	}
	h.ServeHTTP(w, r)
}

// handler is key's MCP handler, made once the key is known to be good.
func (m *mcpSessions) handler(r *http.Request, key string) (http.Handler, error) {
	sum := sha256.Sum256([]byte(key))
	m.mu.Lock()
	h, ok := m.handlers[sum]
	m.mu.Unlock()
	if ok {
		return h, nil
	}
	c, err := client.New(m.self, key)
	if err != nil {
		return nil, err
	}
	if _, err := c.Whoami(r.Context()); err != nil {
		if client.IsUnauthenticated(err) {
			return nil, errdefs.Unauthenticated("missing or wrong API key: send 'Authorization: Bearer <key>'")
		}
		return nil, errdefs.Unavailable("check the key: %v", err)
	}
	srv, err := mcpserver.New(c, m.version)
	if err != nil {
		return nil, err
	}
	h = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.handlers == nil {
		m.handlers = map[[sha256.Size]byte]http.Handler{}
	}
	m.handlers[sum] = h
	return h, nil
}
