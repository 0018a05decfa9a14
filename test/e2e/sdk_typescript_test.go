package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The TypeScript SDK (sdk/typescript): its types are those api/openapi.yaml
// makes, it compiles, and its own tests (node:test) pass against a daemon
// of their own, none skipped, leaving no sandbox behind.
func TestTypeScriptSDK(t *testing.T) {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the TypeScript SDK's test needs %s: ./setup --deps installs it", tool)
		}
	}
	if out, err := exec.Command("node", "--version").Output(); err != nil || !nodeAtLeast(strings.TrimSpace(string(out)), 20, 0, 0) {
		t.Skipf("the TypeScript SDK needs Node.js 20 or newer, this is %q (%v)", out, err)
	}
	dir, err := filepath.Abs("../../sdk/typescript")
	if err != nil {
		t.Fatal(err)
	}
	npmCI(t, dir)
	npm := func(args ...string) []byte {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), "npm", args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("npm %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}

	generated := filepath.Join(t.TempDir(), "schema.ts")
	npm("exec", "--", "openapi-typescript", "../../api/openapi.yaml", "--default-non-nullable", "false", "-o", generated)
	want, err := os.ReadFile(generated)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "src", "schema.ts")); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("sdk/typescript/src/schema.ts is not what api/openapi.yaml makes (%v): run npm run generate in sdk/typescript", err)
	}
	npm("run", "build")

	// Sampled every 0.5 s, a sandbox has metrics to read within a second.
	d := startDaemonWith(t, "--sample-interval", "500ms")
	cmd := exec.CommandContext(t.Context(), "node", "--test", "test/")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HUTCH_URL=http://"+d.addr, "HUTCH_API_KEY="+d.key)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the TypeScript SDK's tests failed: %v\n%s", err, out)
	}
	count := func(what string) int {
		m := regexp.MustCompile(`(?m)^# ` + what + ` (\d+)$`).FindSubmatch(out)
		if m == nil {
			t.Fatalf("no %q count in:\n%s", what, out)
		}
		n, _ := strconv.Atoi(string(m[1]))
		return n
	}
	if pass, fail, skipped := count("pass"), count("fail"), count("skipped"); pass < 11 || fail > 0 || skipped > 0 {
		t.Errorf("%d passed, %d failed, %d skipped; want at least 11 passed, none failed or skipped:\n%s", pass, fail, skipped, out)
	}
	left, err := d.client.ListSandboxes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("the SDK's tests left %d sandboxes", len(left))
	}
}
