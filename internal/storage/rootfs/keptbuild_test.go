package rootfs

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

// npmVersion takes an exact version as it is, asks the registry for a
// tag's (latest when none; scoped names escaped as npm does), and keeps
// no range.
func TestNpmVersion(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept") != "application/vnd.npm.install-v1+json" {
			t.Errorf("Accept %q, want npm's abbreviated metadata", r.Header.Get("Accept"))
		}
		switch r.URL.EscapedPath() {
		case "/deno":
			_, _ = w.Write([]byte(`{"name":"deno","dist-tags":{"latest":"2.5.6","canary":"2.6.0-rc.1"}}`))
		case "/@anthropic-ai%2Fclaude-code":
			_, _ = w.Write([]byte(`{"dist-tags":{"latest":"1.0.3"}}`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	was := npmRegistryURL
	npmRegistryURL = srv.URL
	t.Cleanup(func() { npmRegistryURL = was })

	for spec, want := range map[string]string{
		"deno": "2.5.6", "deno@canary": "2.6.0-rc.1", "deno@2.1.0": "2.1.0", "bun@1.2.3-beta.1": "1.2.3-beta.1",
		"@anthropic-ai/claude-code": "1.0.3",
	} {
		if got, err := npmVersion(t.Context(), spec); err != nil || got != want {
			t.Errorf("npmVersion(%q) = %q, %v; want %q", spec, got, err, want)
		}
	}
	for _, spec := range []string{"deno@^2", "deno@nightly", "no-such-package", "deno@>=1 <3"} {
		if got, err := npmVersion(t.Context(), spec); err == nil {
			t.Errorf("npmVersion(%q) = %q; want an error: no one version to key on", spec, got)
		}
	}
}

// hashTree changes with a file's name or content, and takes a missing
// directory as empty.
func TestHashTree(t *testing.T) {
	dir := t.TempDir()
	empty, err := hashTree(filepath.Join(dir, "missing"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{empty: true}
	for _, step := range []func() error{
		func() error { return os.WriteFile(filepath.Join(dir, "a.crt"), []byte("one"), 0o644) },
		func() error { return os.WriteFile(filepath.Join(dir, "a.crt"), []byte("two"), 0o644) },
		func() error { return os.Rename(filepath.Join(dir, "a.crt"), filepath.Join(dir, "b.crt")) },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
		h, err := hashTree(dir)
		if err != nil {
			t.Fatal(err)
		}
		if seen[h] {
			t.Errorf("hash %s seen before a change", h)
		}
		seen[h] = true
	}
}

// The kept builds' key covers the code that builds: the package's source
// (not its tests) is embedded and hashed.
func TestBuildCodeCoversTheBuild(t *testing.T) {
	for _, f := range []string{"debian.go", "run.go", "trust.go", "keptbuild.go"} {
		if _, err := fs.Stat(buildSource, f); err != nil {
			t.Errorf("%s is not among the hashed source: %v", f, err)
		}
	}
	if got := buildCode(); len(got) != 64 {
		t.Errorf("buildCode() = %q, want a SHA-256", got)
	}
}
