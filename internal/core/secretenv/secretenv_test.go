package secretenv_test

import (
	"context"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core"
	"github.com/hutchdev/hutch/internal/core/coretest"
	"github.com/hutchdev/hutch/internal/core/create"
	"github.com/hutchdev/hutch/internal/core/exec"
	"github.com/hutchdev/hutch/internal/core/secretenv"
	"github.com/hutchdev/hutch/internal/runtime/fake"
	"go.uber.org/goleak"
)

// fakeSecrets is a Source over fixed values: by workspace, then by
// user ("" for the workspace's own).
type fakeSecrets struct {
	mu     sync.Mutex
	values map[string]map[string]map[string]string
	asked  []string // "workspace/user" of each ForCommand
}

func (f *fakeSecrets) ForCommand(_ context.Context, ws, user string, names []string) (secretenv.SecretEnv, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ws == "" {
		return secretenv.SecretEnv{}, errdefs.InvalidArgument("no workspace given")
	}
	f.asked = append(f.asked, ws+"/"+user)
	env := maps.Clone(f.values[ws][""])
	if env == nil {
		env = map[string]string{}
	}
	if user != "" {
		maps.Copy(env, f.values[ws][user])
	}
	for name := range env {
		if names != nil && !slices.Contains(names, name) {
			delete(env, name)
		}
	}
	return secretenv.SecretEnv{Env: env}, nil
}

func (f *fakeSecrets) Check(context.Context, string, string, []string) error { return nil }

// A command gets its workspace's secrets with its user's over them, under
// its own env, narrowed to a create's names; a pool's sandbox, no one's
// until it is taken, warms up without any, and gets its taker's.
func TestCommandSecrets(t *testing.T) {
	t.Parallel()
	src := &fakeSecrets{values: map[string]map[string]map[string]string{
		"acme": {"": {"TOKEN": "team", "OTHER": "o"}, "u-1": {"TOKEN": "mine"}},
	}}
	d := coretest.Start(t, func(c *core.Config) {
		c.Hooks = append(c.Hooks, secretenv.New(secretenv.Config{Source: src}))
		c.Pools = []core.PoolSpec{{Template: "host", Size: 1}}
		c.ReapInterval = 50 * time.Millisecond
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = d.M.Run(ctx)
	}()
	defer func() { cancel(); <-done }()
	pooled := waitPool(t, d)

	sb := d.Create(t, create.Options{Workspace: "acme", User: "u-1"})
	if !slices.Contains(pooled, sb.ID) {
		t.Errorf("the create did not take the pool's sandbox %v: %s", pooled, sb.ID)
	}
	narrow := d.Create(t, create.Options{Workspace: "acme", Secrets: []string{"OTHER"}})
	tests := []struct {
		name string
		id   string
		req  exec.Request
		want string
	}{
		{"the sandbox's user", sb.ID, exec.Request{}, "mine o"},
		{"another user of the call", sb.ID, exec.Request{ForUser: "u-2"}, "team o"},
		{"the command's own env wins", sb.ID, exec.Request{Env: map[string]string{"TOKEN": "own"}}, "own o"},
		{"narrowed at create", narrow.ID, exec.Request{}, " o"},
	}
	for _, tt := range tests {
		tt.req.Command = `printf '%s %s' "$TOKEN" "$OTHER"`
		got, err := run(t, d, tt.id, tt.req)
		if err != nil || got != tt.want {
			t.Errorf("%s: %q, %v; want %q", tt.name, got, err, tt.want)
		}
	}
	for _, id := range []string{sb.ID, narrow.ID} {
		if err := d.M.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
}

func TestMain(m *testing.M) {
	if code, ran := fake.Main(); ran {
		os.Exit(code)
	}
	goleak.VerifyTestMain(m)
}

// waitPool waits for the core's warm pools to fill, and returns the
// sandboxes the backend has then.
func waitPool(t *testing.T, d *coretest.Core) []string {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		full := true
		for _, p := range d.M.Health(t.Context()).Pools {
			full = full && p.Ready == p.Size
		}
		if full {
			ids, err := d.Backend.List(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			return ids
		}
	}
	t.Fatalf("the pool did not fill: %+v", d.M.Health(t.Context()).Pools)
	return nil
}

// run runs req in sandbox id, in its workspace, and returns its stdout.
func run(t *testing.T, d *coretest.Core, id string, req exec.Request) (string, error) {
	t.Helper()
	req.Cwd = d.Workspace(id)
	r, release, err := d.M.Acquire(t.Context(), id)
	if err != nil {
		return "", err
	}
	defer release()
	var stdout strings.Builder
	_, err = exec.Run(t.Context(), r, req, func(s exec.Stream, data []byte) error {
		if s == exec.Stdout {
			stdout.Write(data)
		}
		return nil
	})
	return stdout.String(), err
}
