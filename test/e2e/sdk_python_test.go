package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

// The Python SDK's own tests (sdk/python/tests, unittest), the blocking
// and the asyncio client, against a daemon of their own; they must all
// run, none skipped, and leave no sandbox behind.
func TestPythonSDK(t *testing.T) {
	const python = "/usr/bin/python3"
	// Debian's python3-minimal lacks these; the full python3 has them.
	if err := exec.Command(python, "-c", "import asyncio, http.client, unittest, urllib.request").Run(); err != nil {
		t.Skipf("needs Debian's %s with asyncio and http.client (apt-get install python3)", python)
	}
	sdk, err := filepath.Abs("../../sdk/python")
	if err != nil {
		t.Fatal(err)
	}
	// The examples need a model's API key and the internet: they are only
	// parsed here.
	parse := exec.CommandContext(t.Context(), python, "-c",
		"import ast, sys\nfor f in sys.argv[1:]: ast.parse(open(f).read(), f)", "examples/anthropic_tools.py", "examples/openai_tools.py")
	parse.Dir = sdk
	if out, err := parse.CombinedOutput(); err != nil {
		t.Fatalf("the examples do not parse: %v\n%s", err, out)
	}
	// Sampled every 0.5 s, a sandbox has metrics to read within a second.
	d := startDaemonWith(t, "--sample-interval", "500ms")
	cmd := exec.CommandContext(t.Context(), python, "-m", "unittest", "discover", "-v", "-s", "tests")
	cmd.Dir = sdk
	cmd.Env = append(os.Environ(), "HUTCH_URL=http://"+d.addr, "HUTCH_API_KEY="+d.key, "PYTHONPATH="+sdk,
		"PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the Python SDK's tests failed: %v\n%s", err, out)
	}
	ran := regexp.MustCompile(`(?m)^Ran (\d+) tests? in`).FindSubmatch(out)
	if ran == nil {
		t.Fatalf("no test summary in:\n%s", out)
	}
	if n, _ := strconv.Atoi(string(ran[1])); n < 14 {
		t.Errorf("%d tests ran, want at least 14:\n%s", n, out)
	}
	if regexp.MustCompile(`(?m)skipped|^OK \(`).Match(out) {
		t.Errorf("tests were skipped:\n%s", out)
	}
	left, err := d.client.ListSandboxes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("the SDK's tests left %d sandboxes", len(left))
	}
}
