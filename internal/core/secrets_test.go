package core

import (
	"context"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// fakeSecrets is a SecretSource over fixed values: by workspace, then by
// user ("" for the workspace's own).
type fakeSecrets struct {
	mu     sync.Mutex
	values map[string]map[string]map[string]string
	asked  []string // "workspace/user" of each ForCommand
}

func (f *fakeSecrets) ForCommand(_ context.Context, ws, user string, names []string) (SecretEnv, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ws == "" {
		return SecretEnv{}, errdefs.InvalidArgument("no workspace given")
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
	return SecretEnv{Env: env}, nil
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
	d := newDaemonState(t).start(t, func(c *Config) {
		c.Secrets = src
		c.Pools = []PoolSpec{{Template: "host", Size: 1}}
		c.ReapInterval = 50 * time.Millisecond
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = d.m.Run(ctx)
	}()
	defer func() { cancel(); <-done }()
	pooled := waitPool(t, d)

	sb := d.create(t, CreateOptions{Workspace: "acme", User: "u-1"})
	if !slices.Contains(pooled, sb.ID) {
		t.Errorf("the create did not take the pool's sandbox %v: %s", pooled, sb.ID)
	}
	narrow := d.create(t, CreateOptions{Workspace: "acme", Secrets: []string{"OTHER"}})
	tests := []struct {
		name string
		id   string
		req  ExecRequest
		want string
	}{
		{"the sandbox's user", sb.ID, ExecRequest{}, "mine o"},
		{"another user of the call", sb.ID, ExecRequest{ForUser: "u-2"}, "team o"},
		{"the command's own env wins", sb.ID, ExecRequest{Env: map[string]string{"TOKEN": "own"}}, "own o"},
		{"narrowed at create", narrow.ID, ExecRequest{}, " o"},
	}
	for _, tt := range tests {
		tt.req.Command = `printf '%s %s' "$TOKEN" "$OTHER"`
		got, _, err := d.exec(t, tt.id, tt.req)
		if err != nil || got != tt.want {
			t.Errorf("%s: %q, %v; want %q", tt.name, got, err, tt.want)
		}
	}
	for _, id := range []string{sb.ID, narrow.ID} {
		if err := d.m.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
}
