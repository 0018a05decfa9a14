package api

import (
	"strings"
	"testing"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
)

// A template being built (./setup builds base in the background): a
// create of it answers unavailable, saying how far the build is, and the
// health route lists the builds a key may see: the shared templates' and
// its workspace's, never another workspace's.
func TestTemplateBuildsUnderWay(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	ctx := t.Context()
	for _, name := range []string{"slow", "mine~ws1", "theirs~ws2"} {
		b, err := s.templates.Begin(name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Abort() })
		s.templates.Report(name, rootfs.Progress{Step: "download", Done: 3, Total: 9})
	}
	_, err := s.client.CreateSandbox(ctx, client.CreateSandboxRequest{Template: "slow"})
	if !client.IsUnavailable(err) || !strings.Contains(err.Error(), "being built") || !strings.Contains(err.Error(), "download 3/9") {
		t.Errorf("a create of a template being built: %v, want unavailable saying how far the build is", err)
	}
	ws1 := s.keyIn(t, "k1", "ws1")
	if _, err := ws1.CreateSandbox(ctx, client.CreateSandboxRequest{Template: "mine"}); !client.IsUnavailable(err) {
		t.Errorf("a workspace's create of its own template being built: %v, want unavailable", err)
	}
	for _, tc := range []struct {
		who  keyed
		want string
	}{
		{s.admin(), "mine~ws1 slow theirs~ws2"},
		{ws1, "mine slow"},
	} {
		h, err := tc.who.Health(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, b := range h.Builds {
			names = append(names, b.Template)
			if b.Step != "download" || b.Done != 3 || b.Total != 9 || b.Description == "" {
				t.Errorf("build %+v, want its last progress and a description", b)
			}
		}
		if got := strings.Join(names, " "); got != tc.want {
			t.Errorf("builds seen: %q, want %q", got, tc.want)
		}
	}
}
