package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/client"
)

// A template built from Debian through the CLI, as a user builds one: its
// progress, sandboxes of it under each runtime, and its removal.
func TestTemplateFromDebian(t *testing.T) {
	if _, err := exec.LookPath("debootstrap"); err != nil {
		t.Skip("building templates needs debootstrap (./setup --deps installs it)")
	}
	d := startDaemon(t)

	out, stderr, code := d.cli("", "template", "build", "tiny", "--packages", "jq")
	if code != 0 || !strings.HasPrefix(out, "tiny ") {
		t.Fatalf("template build: %d %q %q", code, out, stderr)
	}
	// Not a terminal: plain progress lines, one per step or message.
	for _, step := range []string{"download", "extract", "configure", "finish"} {
		if !strings.Contains(stderr, "\n"+step+" ") {
			t.Errorf("no %q progress line in:\n%s", step, stderr)
		}
	}
	if strings.Contains(stderr, "\r") {
		t.Errorf("progress redrawn in place though stderr is not a terminal")
	}

	out, _, code = d.cli("", "template", "ls", "-o", "json")
	var list []client.Template
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) != 2 ||
		list[0].Name != "host" || list[1].Name != "tiny" || list[1].Source != client.TemplateSourceDebian ||
		strings.Join(list[1].Packages, ",") != "jq" {
		t.Fatalf("template ls -o json: %d %s", code, out)
	}

	var ids []string
	forEachRuntime(t, func(t *testing.T, runtime string) {
		sb := d.create(client.CreateSandboxRequest{Template: "tiny", Runtime: runtime})
		ids = append(ids, sb.ID)
		res := d.exec(sb.ID, `jq -n '1+1'; id -un; cat /etc/debian_version >/dev/null && echo debian; touch ~/workspace/w /tmp/t && echo writes`)
		if res.ExitCode != 0 || res.Stdout != "2\nuser\ndebian\nwrites\n" {
			t.Fatalf("in a %s sandbox of tiny: %+v", runtime, res)
		}
	})

	if _, stderr, code := d.cli("", "template", "rm", "tiny"); code != 1 || !strings.Contains(stderr, "used by") {
		t.Fatalf("template rm of a template in use: %d %q, want refused", code, stderr)
	}
	for _, id := range ids {
		if err := d.client.DeleteSandbox(t.Context(), id); err != nil {
			t.Fatal(err)
		}
	}
	if out, stderr, code := d.cli("", "template", "rm", "tiny"); code != 0 || out != "tiny\n" {
		t.Fatalf("template rm: %d %q %q", code, out, stderr)
	}
	if _, err := d.client.GetTemplate(t.Context(), "tiny"); !client.IsNotFound(err) {
		t.Fatalf("GetTemplate after rm: %v, want not found", err)
	}
	assertNoTemplateBuilds(t, d)
}

// A build that cannot succeed says why and keeps nothing.
func TestTemplateBuildFailures(t *testing.T) {
	if _, err := exec.LookPath("debootstrap"); err != nil {
		t.Skip("building templates needs debootstrap (./setup --deps installs it)")
	}
	d := startDaemon(t)
	ctx := t.Context()
	for _, tc := range []struct {
		req  client.BuildTemplateRequest
		want string
	}{
		{client.BuildTemplateRequest{Name: "bad", Packages: []string{"no-such-package-hutch"}}, "Couldn't find these debs: no-such-package-hutch"},
		{client.BuildTemplateRequest{Name: "Bad"}, `template name "Bad"`},
		{client.BuildTemplateRequest{Name: "host"}, "built-in host template"},
		{client.BuildTemplateRequest{Name: "bad", Packages: []string{"-x"}}, `package name "-x"`},
	} {
		var steps int
		_, err := d.client.BuildTemplate(ctx, tc.req, func(client.BuildProgress) { steps++ })
		if !client.IsInvalidArgument(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("build %+v: %v, want an invalid argument saying %q", tc.req, err, tc.want)
		}
	}
	if _, err := d.client.GetTemplate(ctx, "bad"); !client.IsNotFound(err) {
		t.Errorf("GetTemplate(bad) after failed builds: %v, want not found", err)
	}
	if err := d.client.DeleteTemplate(ctx, "host"); !client.IsInvalidArgument(err) {
		t.Errorf("DeleteTemplate(host): %v, want refused", err)
	}
	assertNoTemplateBuilds(t, d)
}

func assertNoTemplateBuilds(t *testing.T, d *daemon) {
	t.Helper()
	left, err := filepath.Glob(filepath.Join(d.dataDir, "templates", ".build-*"))
	if err != nil || len(left) > 0 {
		t.Errorf("template builds left: %v %v", left, err)
	}
	if _, err := os.Stat(filepath.Join(d.dataDir, "templates", "bad")); !os.IsNotExist(err) {
		t.Errorf("a failed build left its name's directory: %v", err)
	}
}
