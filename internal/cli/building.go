package cli

import (
	"context"
	"time"

	"github.com/hutchdev/hutch/client"
)

// A create that names a template still being built (./setup builds base
// in the background) waits for the build, saying how far it is, rather
// than failing: the daemon answers such a create unavailable, and its
// health lists the builds under way.

// How often a waiting create looks at the build again, and says how far
// it is.
var (
	buildPoll   = 2 * time.Second
	buildReport = 30 * time.Second
)

// createSandbox creates a sandbox as c.CreateSandbox does, waiting first
// for a build of its template under way, and saying how far it is every
// buildReport.
func (a *app) createSandbox(ctx context.Context, c *client.Client, req client.CreateSandboxRequest) (*client.Sandbox, error) {
	for {
		sb, err := c.CreateSandbox(ctx, req)
		if err == nil || !client.IsUnavailable(err) || req.Template == "" {
			return sb, err
		}
		b, ok := buildOf(ctx, c, req.Template)
		if !ok {
			return nil, err
		}
		a.printf("hutch: template %s is being built (Ctrl-C stops waiting): %s\n", req.Template, b.Description)
		for said := time.Now(); ok; b, ok = buildOf(ctx, c, req.Template) {
			if time.Since(said) >= buildReport {
				a.printf("hutch: %s\n", b.Description)
				said = time.Now()
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(buildPoll):
			}
		}
	}
}

// buildOf is the build of template name under way, if any.
func buildOf(ctx context.Context, c *client.Client, name string) (client.TemplateBuild, bool) {
	h, err := c.Health(ctx)
	if err != nil {
		return client.TemplateBuild{}, false
	}
	for _, b := range h.Builds {
		if b.Template == name {
			return b, true
		}
	}
	return client.TemplateBuild{}, false
}
