package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/net/nettest"
)

// TestE2BSDK runs the unmodified E2B SDKs of npm (e2b and
// @e2b/code-interpreter, pinned in test/e2b/package-lock.json) against a
// daemon, configured by nothing but the environment `hutch e2b env`
// prints, under each runtime. The scripts in test/e2b/ print each check's
// facts as a JSON line; this test asserts them: the control plane
// (create, list, getInfo, setTimeout, kill, pause and connect, fork,
// snapshots, updateNetwork), commands, files, a PTY, getHost, and the
// errors the SDK branches on, another workspace's included
// (TestE2BCodeInterpreter has the code interpreter; TestSandboxMetrics,
// alone on the host, getMetrics).
func TestE2BSDK(t *testing.T) {
	t.Parallel()
	if skipReason != "" {
		t.Skip(skipReason)
	}
	scripts := e2bScripts(t)
	in := nettest.Start(t)
	d := startDaemonWith(t, "--network-netns", in.Netns, "--network-dns", in.DNS)

	env, vars := e2bEnv(t, d)
	_, frontPort, _ := net.SplitHostPort(d.e2bAddr)
	for name, want := range map[string]string{
		"E2B_API_URL":     "http://" + d.addr + "/e2b",
		"E2B_SANDBOX_URL": "http://" + d.e2bAddr,
		"E2B_DOMAIN":      "localhost:" + frontPort,
	} {
		if vars[name] != want {
			t.Errorf("hutch e2b env: %s=%q, want %q", name, vars[name], want)
		}
	}
	if !regexp.MustCompile(`^e2b_[0-9a-f]+$`).MatchString(vars["E2B_API_KEY"]) {
		t.Errorf("hutch e2b env: E2B_API_KEY=%q, want e2b_<hex>", vars["E2B_API_KEY"])
	}
	// A new key of another workspace.
	otherEnv, otherVars := e2bEnv(t, d, "--key", "e2b-other", "--workspace", "e2b-other")
	if otherVars["E2B_API_KEY"] == vars["E2B_API_KEY"] {
		t.Errorf("hutch e2b env --key e2b-other printed the daemon's own key")
	}

	eachE2BRuntime(t, d, func(t *testing.T, runtime string) {
		run := func(t *testing.T, env []string, script string, args ...string) e2bFacts {
			t.Helper()
			f := scripts.run(t, env, script, args...)
			d.sandboxIDs = append(d.sandboxIDs, f.sandboxIDs...)
			return f
		}

		t.Run("lifecycle", func(t *testing.T) {
			f := run(t, env, "lifecycle.mjs")
			id, _ := f.facts["create"]["sandboxId"].(string)
			run, _ := f.facts["create"]["run"].(string)
			f.want(t, "list", map[string]any{"ids": []string{id}})
			f.want(t, "getInfo", map[string]any{
				"sandboxId": id, "state": "running", "metadata": map[string]string{"run": run, "role": "main"},
			})
			f.within(t, "getInfo", "secondsLeft", 100, 121)
			f.within(t, "setTimeout", "secondsLeft", 580, 601)
			f.want(t, "kill", map[string]any{"killed": true, "again": false, "left": []any{f.facts["createOther"]["sandboxId"]}})
		})

		t.Run("commands", func(t *testing.T) {
			f := run(t, env, "commands.mjs")
			f.want(t, "run", map[string]any{
				"exitCode": 0, "stdout": "out\nhello\n", "stderr": "err\n", "onStdout": "out\nhello\n", "onStderr": "err\n",
			})
			f.want(t, "exit", map[string]any{
				"thrown": "CommandExitError", "isCommandExitError": true, "exitCode": 3, "stderr": "failing\n",
			})
			f.want(t, "background", map[string]any{
				"listed": true, "ticked": true, "killed": true, "exited": "CommandExitError", "listedAfter": false, "killedAgain": false,
			})
			f.want(t, "stdin", map[string]any{"exitCode": 0, "stdout": "hello stdin (stdin closed)\n"})
		})

		t.Run("files", func(t *testing.T) {
			f := run(t, env, "files.mjs")
			f.want(t, "write", map[string]any{"path": "/home/user/one.txt", "read": "one\n"})
			f.want(t, "writeSeveral", map[string]any{
				"paths": []string{"/home/user/dir/a.txt", "/home/user/dir/sub/b.txt"}, "a": "a", "b": "b",
			})
			f.want(t, "list", map[string]any{"entries": []string{"a.txt file", "sub dir"}})
			f.want(t, "exists", map[string]any{"file": true, "dir": true, "missing": false})
			f.want(t, "makeDir", map[string]any{"made": true, "again": false, "isDir": "dir"})
			f.want(t, "rename", map[string]any{"path": "/home/user/made/a2.txt", "oldExists": false, "read": "a"})
			f.want(t, "remove", map[string]any{"file": false, "dir": false})
			f.want(t, "watchDir", map[string]any{"name": "new.txt"})
			f.want(t, "urls", map[string]any{
				"uploadStatus": 200, "read": "uploaded by fetch\n", "downloadStatus": 200, "downloaded": "uploaded by fetch\n",
			})
		})

		t.Run("pty", func(t *testing.T) {
			f := run(t, env, "pty.mjs")
			f.want(t, "pty", map[string]any{"ran": true, "before": true, "after": true, "exited": 0})
		})

		t.Run("getHost", func(t *testing.T) {
			f := run(t, env, "host.mjs")
			id, _ := f.facts["create"]["sandboxId"].(string)
			f.want(t, "getHost", map[string]any{
				"host": "3000-" + id + ".localhost:" + frontPort, "status": 200, "body": "hello from the sandbox\n",
			})
		})

		t.Run("pause", func(t *testing.T) {
			f := run(t, env, "pause.mjs")
			f.want(t, "pause", map[string]any{"paused": true, "state": "paused", "listedPaused": true})
			f.want(t, "connect", map[string]any{"state": "running", "file": "kept", "echo": "back\n"})
			// gVisor's pause checkpoints the sandbox's memory;
			// runc's may not keep it.
			if runtime == "gvisor" {
				f.want(t, "connect", map[string]any{"processSurvived": true})
			}
		})

		t.Run("fork", func(t *testing.T) {
			f := run(t, env, "fork.mjs")
			f.want(t, "fork", map[string]any{
				"distinct": true, "forkSaw": "before the fork", "origin": "before the fork", "fork": "in the fork", "originRuns": "still here\n",
			})
			f.want(t, "snapshot", map[string]any{"listed": true, "snapSaw": "before the fork", "deleted": true, "again": false})
		})

		t.Run("updateNetwork", func(t *testing.T) {
			f := run(t, env, "network.mjs")
			f.want(t, "updateNetwork", map[string]any{"before": "hello from other.test", "allowed": "hello from allowed.test"})
			if refused, _ := f.facts["updateNetwork"]["refused"].(string); refused == "" || strings.Contains(refused, "hello from") {
				t.Errorf("other.test after the update: %q, want refused", refused)
			}
		})

		t.Run("errors", func(t *testing.T) {
			f := run(t, env, "errors.mjs")
			f.want(t, "missingFile", map[string]any{"error": "FileNotFoundError"})
			f.want(t, "wrongKey", map[string]any{
				"list": "AuthenticationError", "create": "AuthenticationError", "getInfo": "AuthenticationError",
			})
			f.want(t, "killedSandbox", map[string]any{
				"killed": true, "killAgain": false, "getInfo": "SandboxNotFoundError", "connect": "SandboxNotFoundError",
			})
		})

		t.Run("otherWorkspace", func(t *testing.T) {
			sb, err := d.client.CreateSandbox(t.Context(), client.CreateSandboxRequest{Runtime: runtime})
			if err != nil {
				t.Fatal(err)
			}
			d.sandboxIDs = append(d.sandboxIDs, sb.ID)
			f := run(t, otherEnv, "other-workspace.mjs", sb.ID)
			f.want(t, "otherWorkspace", map[string]any{
				"getInfo": "SandboxNotFoundError", "connect": "SandboxNotFoundError", "listed": false, "kill": false,
			})
			if _, err := d.client.GetSandbox(t.Context(), sb.ID); err != nil {
				t.Errorf("the sandbox after another workspace's kill: %v", err)
			}
		})

	})
}

// TestE2BCodeInterpreter runs E2B's Code Interpreter SDK, unmodified, on
// the template its sandboxes name (code-interpreter-v1, Hutch's python,
// built first: make test-templates runs it), under each runtime: state
// kept between runs, a chart, an error with its traceback, contexts, and
// JavaScript.
func TestE2BCodeInterpreter(t *testing.T) {
	t.Parallel()
	if skipReason != "" {
		t.Skip(skipReason)
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		t.Skip("building templates needs debootstrap (./setup --deps installs it)")
	}
	scripts := e2bScripts(t)
	d := startDaemon(t)
	env, _ := e2bEnv(t, d)
	if out, stderr, code := d.cli("", "template", "build", "python"); code != 0 || !strings.HasPrefix(out, "python ") {
		t.Fatalf("template build python: %d %q\n%s", code, out, tail(stderr, 2000))
	}
	eachE2BRuntime(t, d, func(t *testing.T, runtime string) {
		f := scripts.run(t, env, "code.mjs")
		d.sandboxIDs = append(d.sandboxIDs, f.sandboxIDs...)
		f.want(t, "state", map[string]any{"text": "2"})
		f.want(t, "chart", map[string]any{"results": 1, "png": true, "type": "line", "title": "Squares"})
		f.want(t, "error", map[string]any{"name": "ValueError", "value": "boom", "tracebackNamesF": true})
		f.want(t, "contexts", map[string]any{
			"language": "python", "cwd": "/tmp", "inContext": "(5, '/tmp')", "yInDefault": "NameError",
			"listed": true, "afterRestart": "NameError", "listedAfterRemove": false,
		})
		f.want(t, "javascript", map[string]any{"language": "javascript", "text": "42", "stdout": "from js\n"})
	})
}

// eachE2BRuntime runs test under runc, then under gVisor. E2B's create
// names no runtime: the daemon's default is what its sandboxes get, so d
// starts again with gvisor its default (the same data dir, key and
// addresses).
func eachE2BRuntime(t *testing.T, d *daemon, test func(t *testing.T, runtime string)) {
	for _, runtime := range []string{"runc", "gvisor"} {
		if runtime == "gvisor" && runscBin != "" {
			d.stop()
			d.flags = append(d.flags, "--runtime", "gvisor")
			d.start()
		}
		t.Run(runtime, func(t *testing.T) {
			if runtime == "gvisor" {
				requireGvisor(t)
			}
			test(t, runtime)
		})
	}
}

// e2bScriptsDir holds the scripts and the SDKs' pins, beside this package.
const e2bScriptsDir = "../e2b"

// e2bRunner runs the scripts of e2bScriptsDir with node.
type e2bRunner struct{ dir string }

// e2bScripts skips the test without node and npm, or with a node older
// than the SDKs need, and installs the pinned SDKs with npm ci when
// node_modules is missing or was installed from another lock (its hash is
// kept in node_modules, which npm ci empties first).
func e2bScripts(t *testing.T) e2bRunner {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the E2B test needs %s: ./setup --deps installs it", tool)
		}
	}
	out, err := exec.Command("node", "--version").Output()
	if err != nil {
		t.Fatalf("node --version: %v", err)
	}
	// e2b's engines: ">=20.18.1 <21 || >=22".
	if v := strings.TrimSpace(string(out)); !nodeAtLeast(v, 20, 18, 1) || strings.HasPrefix(v, "v21.") {
		t.Skipf("the E2B SDKs need Node.js 20.18.1 or newer (not 21), this is %s", v)
	}
	dir, err := filepath.Abs(e2bScriptsDir)
	if err != nil {
		t.Fatal(err)
	}
	npmCI(t, dir)
	return e2bRunner{dir: dir}
}

// npmCIs serializes npmCI: tests run at once share test/e2b.
var npmCIs sync.Mutex

// npmCI installs the packages dir's package-lock.json pins with npm ci
// when node_modules is missing or was installed from another lock (its
// hash is kept in node_modules, which npm ci empties first).
func npmCI(t *testing.T, dir string) {
	t.Helper()
	npmCIs.Lock()
	defer npmCIs.Unlock()
	lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(lock)
	stamp := filepath.Join(dir, "node_modules", ".hutch-lock-sha256")
	if b, err := os.ReadFile(stamp); err == nil && string(b) == hex.EncodeToString(sum[:]) {
		return
	}
	cmd := exec.CommandContext(t.Context(), "npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
	}
	if err := os.WriteFile(stamp, []byte(hex.EncodeToString(sum[:])), 0o644); err != nil {
		t.Fatal(err)
	}
}

// nodeAtLeast reports whether node's version v ("v20.20.2") is at least
// major.minor.patch.
func nodeAtLeast(v string, major, minor, patch int) bool {
	var got [3]int
	for i, part := range strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3) {
		got[i], _ = strconv.Atoi(part)
	}
	want := [3]int{major, minor, patch}
	for i := range got {
		if got[i] != want[i] {
			return got[i] > want[i]
		}
	}
	return true
}

// e2bEnv runs `hutch e2b env` with args and returns the environment a
// script runs in (this process's, without E2B variables of its own, and
// what it printed), and the variables it printed.
func e2bEnv(t *testing.T, d *daemon, args ...string) ([]string, map[string]string) {
	t.Helper()
	out, stderr, code := d.cli("", append([]string{"e2b", "env"}, args...)...)
	if code != 0 {
		t.Fatalf("hutch e2b env %v: %d %s", args, code, stderr)
	}
	vars := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		if !ok {
			t.Fatalf("hutch e2b env: a line %q, want export NAME=VALUE", line)
		}
		vars[name] = strings.Trim(value, `'"`)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "E2B_") {
			env = append(env, kv)
		}
	}
	for _, name := range []string{"E2B_API_KEY", "E2B_API_URL", "E2B_SANDBOX_URL", "E2B_DOMAIN"} {
		if vars[name] == "" {
			t.Fatalf("hutch e2b env printed no %s:\n%s", name, out)
		}
		env = append(env, name+"="+vars[name])
	}
	return env, vars
}

// e2bFacts are what a script printed: each check's facts, and the ids of
// the sandboxes it made (the facts named sandboxId), for the leak census.
type e2bFacts struct {
	facts      map[string]map[string]any
	sandboxIDs []string
}

// run runs script with node in env; a script that fails fails the test
// with what it printed, and the facts it printed before are returned.
func (r e2bRunner) run(t *testing.T, env []string, script string, args ...string) e2bFacts {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{script}, args...)...)
	cmd.Dir, cmd.Env = r.dir, env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	f := e2bFacts{facts: map[string]map[string]any{}}
	for _, line := range strings.Split(stdout.String(), "\n") {
		var fact map[string]any
		if json.Unmarshal([]byte(line), &fact) != nil {
			continue // the SDK's own output, if any
		}
		check, _ := fact["check"].(string)
		f.facts[check] = fact
		if id, ok := fact["sandboxId"].(string); ok {
			f.sandboxIDs = append(f.sandboxIDs, id)
		}
	}
	if err != nil {
		t.Errorf("node %s: %v\nstdout:\n%s\nstderr:\n%s", script, err, tail(stdout.String(), 3000), tail(stderr.String(), 3000))
	} else {
		t.Logf("node %s:\n%s", script, stdout.String())
	}
	return f
}

// want checks that check's facts have want's values (compared as JSON).
func (f e2bFacts) want(t *testing.T, check string, want map[string]any) {
	t.Helper()
	got, ok := f.facts[check]
	if !ok {
		t.Errorf("%s: no facts printed", check)
		return
	}
	for name, w := range want {
		wj, _ := json.Marshal(w)
		gj, _ := json.Marshal(got[name])
		if !bytes.Equal(wj, gj) {
			t.Errorf("%s: %s is %s, want %s (all: %v)", check, name, gj, wj, got)
		}
	}
}

// within checks that a fact is a number in [lo, hi].
func (f e2bFacts) within(t *testing.T, check, name string, lo, hi float64) {
	t.Helper()
	if n, ok := f.facts[check][name].(float64); !ok || n < lo || n > hi {
		t.Errorf("%s: %s is %v, want %v to %v (all: %v)", check, name, f.facts[check][name], lo, hi, f.facts[check])
	}
}
