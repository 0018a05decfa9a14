package cli

import (
	"context"
	"time"

	"github.com/hutchdev/hutch/client"
)

// A create that names a template still being built (./setup builds base
// in the background), or whose runtime is still being set up (./setup
// builds gVisor's runsc in the background too), waits for it, saying how
// far it is, rather than failing: the daemon answers such a create
// unavailable, and its health lists the builds under way and the pending
// runtimes.

// How often a waiting create looks again, and says how far it is.
var (
	buildPoll   = 2 * time.Second
	buildReport = 30 * time.Second
)

// createSandbox creates a sandbox as c.CreateSandbox does, waiting first
// for a build of its template or its runtime under way, and saying how far
// it is every buildReport. The wait ends with ctx (Ctrl-C); a create
// attempt, once sent, goes on for up to attempt whatever ctx does (0: it
// ends with ctx), so that the caller learns the sandbox the daemon may make
// anyway.
func (a *app) createSandbox(ctx context.Context, c *client.Client, req client.CreateSandboxRequest, attempt time.Duration) (*client.Sandbox, error) {
	create := func() (*client.Sandbox, error) {
		if attempt == 0 {
			return c.CreateSandbox(ctx, req)
		}
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), attempt)
		defer cancel()
		return c.CreateSandbox(actx, req)
	}
	for {
		sb, err := create()
		if err == nil || !client.IsUnavailable(err) {
			return sb, err
		}
		what, ok := awaited(ctx, c, req)
		if !ok {
			return nil, err
		}
		a.printf("hutch: %s (Ctrl-C stops waiting)\n", what)
		for said := time.Now(); ok; what, ok = awaited(ctx, c, req) {
			if time.Since(said) >= buildReport {
				a.printf("hutch: %s\n", what)
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

// awaited says what a create of req waits for, if anything: a build of its
// template under way, or its runtime being set up.
func awaited(ctx context.Context, c *client.Client, req client.CreateSandboxRequest) (string, bool) {
	h, err := c.Health(ctx)
	if err != nil {
		return "", false
	}
	for _, b := range h.Builds {
		if req.Template != "" && b.Template == req.Template {
			return "template " + b.Template + " is being built: " + b.Description, true
		}
	}
	runtime := req.Runtime
	if runtime == "" {
		runtime = h.DefaultRuntime
	}
	for _, b := range h.Backends {
		if b.Name == runtime && b.Pending {
			return "runtime " + b.Name + " is being set up: " + b.Reason, true
		}
	}
	return "", false
}
