package e2e

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/client"
)

// Through the CLI, as an operator would: a key made in a workspace, a
// quota set on it; its key's create past the quota is refused with the
// quota's figures and leaves nothing (the leak census at cleanup), and
// the usage says what runs.
func TestWorkspaceQuota(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	ctx := t.Context()
	out, stderr, code := d.cli("", "key", "create", "acme-app", "--workspace", "acme")
	if code != 0 {
		t.Fatalf("hutch key create: %d %s", code, stderr)
	}
	acme, err := client.New("http://"+d.addr, strings.TrimSpace(out), client.WithHTTPClient(http.DefaultClient))
	if err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := d.cli("", "workspace", "quota", "acme", "--sandboxes", "1", "--memory-mb", "1024"); code != 0 {
		t.Fatalf("hutch workspace quota: %d %s", code, stderr)
	}
	sb, err := acme.CreateSandbox(ctx, client.CreateSandboxRequest{MemoryMB: 512})
	if err != nil {
		t.Fatal(err)
	}
	d.sandboxIDs = append(d.sandboxIDs, sb.ID)
	for _, tt := range []struct {
		req  client.CreateSandboxRequest
		want string
	}{
		{client.CreateSandboxRequest{MemoryMB: 256}, "running sandboxes: 1 of 1 run"},
		{client.CreateSandboxRequest{Runtime: "gvisor"}, "running sandboxes: 1 of 1 run"},
	} {
		_, err := acme.CreateSandbox(ctx, tt.req)
		var ce *client.Error
		if !errors.As(err, &ce) || ce.StatusCode != http.StatusTooManyRequests || ce.Code != "resource_exhausted" || !strings.Contains(ce.Message, tt.want) {
			t.Errorf("a create past the quota: %v; want 429 resource_exhausted saying %q", err, tt.want)
		}
	}
	if list, err := d.client.ListSandboxes(ctx); err != nil || len(list) != 1 {
		t.Errorf("sandboxes after the refusals: %+v, %v", list, err)
	}
	usage, _, code := d.cli("", "workspace", "usage", "acme")
	if code != 0 || !strings.Contains(usage, "512 MiB") || !strings.Contains(usage, "1024 MiB") {
		t.Errorf("hutch workspace usage acme: %d\n%s", code, usage)
	}
	// Another workspace is not bound by acme's quota.
	other := d.create(client.CreateSandboxRequest{})
	// The daemon's own key lists both, each with its workspace.
	if out, _, code := d.cli("", "ls"); code != 0 || !strings.Contains(out, "WORKSPACE") || !strings.Contains(out, "acme") || !strings.Contains(out, "default") {
		t.Errorf("hutch ls by the daemon's own key: %d\n%s", code, out)
	}
	for _, id := range []string{sb.ID, other.ID} {
		if err := d.client.DeleteSandbox(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
}
