package agentclient

import (
	"net/http"

	"github.com/hutchdev/hutch/internal/agent/agentpb/filesystem/filesystemconnect"
	"github.com/hutchdev/hutch/internal/agent/agentpb/process/processconnect"
)

// envdClients are the agent's envd services as they are, for EnvdFront:
// their errors are the agent's Connect errors, not this package's kinds.
type envdClients struct {
	Process    processconnect.ProcessClient
	Filesystem filesystemconnect.FilesystemClient
}

func (c *Client) envd() envdClients {
	return envdClients{
		Process:    processconnect.NewProcessClient(c.http, baseURL),
		Filesystem: filesystemconnect.NewFilesystemClient(c.http, baseURL),
	}
}

// EnvdHTTP carries requests for the agent's envd HTTP routes (/files) to
// it, as they are, for a front that passes E2B's SDKs' calls on
// (internal/front/e2b). Their URLs are BaseURL's.
func (c *Client) EnvdHTTP() http.RoundTripper { return c.transport }

// BaseURL is the URL the agent's requests go to (the host is never
// resolved: the transport dials the agent).
const BaseURL = baseURL
