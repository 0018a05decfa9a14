package client

import (
	"context"
	"net/http"
)

// E2BInfo is where E2B's SDKs reach this daemon (GET /v1/e2b): the
// environment `hutch e2b env` prints, but for the key.
type E2BInfo struct {
	// APIURL is E2B_API_URL: the control plane.
	APIURL string `json:"api_url"`
	// SandboxURL is E2B_SANDBOX_URL: the sandbox front ("" when the daemon
	// serves none).
	SandboxURL string `json:"sandbox_url"`
	// Domain is E2B_DOMAIN: getHost(port) is <port>-<id>.<Domain>.
	Domain string `json:"domain"`
}

// E2BInfo says where E2B's SDKs reach the daemon.
func (c *Client) E2BInfo(ctx context.Context) (*E2BInfo, error) {
	var out E2BInfo
	if err := c.call(ctx, request{method: http.MethodGet, path: "/v1/e2b"}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// APIKey is the key the Client presents.
func (c *Client) APIKey() string { return c.apiKey }
