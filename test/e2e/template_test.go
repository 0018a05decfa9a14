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
	t.Parallel()
	if _, err := exec.LookPath("debootstrap"); err != nil {
		t.Skip("building templates needs debootstrap (./setup --deps installs it)")
	}
	d := startDaemon(t)

	out, stderr, code := d.cli("", "template", "build", "tiny", "--packages", "jq")
	if code != 0 || !strings.HasPrefix(out, "tiny ") {
		t.Fatalf("template build: %d %q %q", code, out, stderr)
	}
	// Not a terminal: plain progress lines, one per step or message: the
	// base system's (debootstrap's, or the one kept by an earlier build
	// sharing the package cache), then apt-get's in a build sandbox.
	for _, step := range []string{"base", "index", "install", "finish"} {
		if !strings.Contains("\n"+stderr, "\n"+step+" ") {
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
	t.Parallel()
	if _, err := exec.LookPath("debootstrap"); err != nil {
		t.Skip("building templates needs debootstrap (./setup --deps installs it)")
	}
	d := startDaemon(t)
	ctx := t.Context()
	for _, tc := range []struct {
		req  client.BuildTemplateRequest
		want string
	}{
		{client.BuildTemplateRequest{Name: "bad", Packages: []string{"no-such-package-hutch"}}, "Unable to locate package no-such-package-hutch"},
		{client.BuildTemplateRequest{Name: "bad", Packages: []string{"jq"}, NpmPackages: []string{"deno"}}, "add nodejs and npm"},
		{client.BuildTemplateRequest{Name: "bad", Packages: []string{"npm"}, NpmPackages: []string{"--prefix=/"}}, `npm package "--prefix=/"`},
		{client.BuildTemplateRequest{Name: "bad", Mirror: "file:/srv/debian"}, "http:// or https://"},
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
	// Build steps' sandboxes are gone with them.
	d.awaitTeardowns()
	if left, _ := os.ReadDir(filepath.Join(d.dataDir, "sandboxes")); len(left) > 0 {
		t.Errorf("build sandboxes left: %v", left)
	}
}

// tail is the end of s, for failure messages.
func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// TestTemplateFromHutchfile layers a template on a Debian one with a
// Hutchfile: ENV, WORKDIR, COPY from the context, RUN as root and as the
// user; the parent stays as it was and shares its files; a failing RUN
// names its line and keeps nothing.
func TestTemplateFromHutchfile(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("debootstrap"); err != nil {
		t.Skip("building templates needs debootstrap (./setup --deps installs it)")
	}
	d := startDaemon(t)
	if out, stderr, code := d.cli("", "template", "build", "plain"); code != 0 {
		t.Fatalf("template build plain: %d %q\n%s", code, out, tail(stderr, 2000))
	}
	dir := t.TempDir()
	for name, data := range map[string]string{
		"Hutchfile": `FROM plain
ENV GREETING=hello
WORKDIR /opt/app
COPY note.txt data/ ./
RUN echo "$GREETING from $(pwd)" > made && \
    rm /etc/issue.net
USER user
RUN whoami > ~/who
`,
		"note.txt":     "a note\n",
		"data/one.txt": "one\n",
		"Broken":       "FROM plain\nRUN true\nRUN echo on the way out; exit 3\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, stderr, code := d.cli("", "template", "build", "layered", "-f", filepath.Join(dir, "Hutchfile"))
	if code != 0 || !strings.HasPrefix(out, "layered ") {
		t.Fatalf("template build -f: %d %q\n%s", code, out, tail(stderr, 2000))
	}
	info, err := d.client.GetTemplate(t.Context(), "layered")
	if err != nil || info.Source != "hutchfile" || !strings.HasPrefix(info.Parent, "plain@") || info.Env["GREETING"] != "hello" || len(info.Steps) != 6 {
		t.Errorf("the layered template: %+v, %v", info, err)
	}
	forEachRuntime(t, func(t *testing.T, runtime string) {
		out, stderr, code := d.cli("", "run", "--template", "layered", "--runtime", runtime, "--",
			"sh", "-c", `cat /opt/app/made /opt/app/note.txt /opt/app/one.txt ~/who; echo "$GREETING"; test -e /etc/issue.net || echo gone`)
		if want := "hello from /opt/app\na note\none\nuser\nhello\ngone\n"; code != 0 || out != want {
			t.Errorf("in a %s sandbox of layered: %d %q %q, want %q", runtime, code, out, stderr, want)
		}
	})
	// The parent is as it was, and shares the files the Hutchfile left.
	roots := map[string]string{}
	for _, name := range []string{"plain", "layered"} {
		tm, err := d.client.GetTemplate(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		roots[name] = filepath.Join(d.dataDir, "templates", name, tm.Version, "rootfs")
	}
	if _, err := os.Stat(filepath.Join(roots["plain"], "etc/issue.net")); err != nil {
		t.Errorf("the parent lost /etc/issue.net, removed in the child: %v", err)
	}
	if _, err := os.Stat(filepath.Join(roots["plain"], "opt/app")); !os.IsNotExist(err) {
		t.Errorf("the parent has the child's /opt/app: %v", err)
	}
	a, errA := os.Stat(filepath.Join(roots["plain"], "usr/bin/bash"))
	b, errB := os.Stat(filepath.Join(roots["layered"], "usr/bin/bash"))
	if errA != nil || errB != nil || !os.SameFile(a, b) {
		t.Errorf("parent and child do not share /usr/bin/bash: %v %v", errA, errB)
	}

	_, stderr, code = d.cli("", "template", "build", "bad", "-f", filepath.Join(dir, "Broken"))
	if code != 1 || !strings.Contains(stderr, "Hutchfile line 3") || !strings.Contains(stderr, "exit code 3") {
		t.Errorf("a failing RUN: %d %q", code, stderr)
	}
	assertNoTemplateBuilds(t, d)
}
