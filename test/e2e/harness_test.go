// Package e2e builds the real hutch binary and drives it: a real daemon on a
// temporary data dir, real runc and gVisor sandboxes, the REST API through
// the Go SDK and the CLI as a user runs it.
package e2e

import (
	"bufio"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/runtime/disk"
	"github.com/hutchdev/hutch/test/neighbor"
)

// hutchBin is the binary under test, built once by TestMain.
var hutchBin string

// skipReason is why these tests cannot run here, if they cannot.
var skipReason string

// runscBin is gVisor's runsc (bin/runsc of the repository, else from PATH),
// or "" when there is none: then gVisor tests skip.
var runscBin string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	switch {
	case os.Geteuid() != 0:
		skipReason = "end-to-end tests need root (sandboxes use mounts and cgroups)"
	default:
		if _, err := exec.LookPath("runc"); err != nil {
			skipReason = "end-to-end tests need runc: install it with ./setup --deps"
		}
	}
	if skipReason != "" {
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "hutch-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if p, err := filepath.Abs("../../bin/runsc"); err == nil && isExecutable(p) {
		runscBin = p
	} else if p, err := exec.LookPath("runsc"); err == nil {
		runscBin = p
	}
	hutchBin = filepath.Join(dir, "hutch")
	if err := buildHutch(hutchBin); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The daemon ./setup started, if it runs here, is left as it was.
	before := neighbor.Take(runscBin)
	code := m.Run()
	if err := neighbor.Take(runscBin).Since(before); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return code
}

// buildHutch builds hutch as make build does: the agent's own binary
// first, renamed into the folder hutch embeds (see the Makefile's build),
// then hutch with it.
func buildHutch(out string) error {
	embedDir := "../../internal/agent/agentexe/embed"
	tmp := filepath.Join(embedDir, fmt.Sprintf(".hutch-agent.%d", os.Getpid()))
	for _, b := range []struct{ out, pkg string }{{tmp, "../../cmd/hutch-agent"}, {out, "../../cmd/hutch"}} {
		build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", b.out, b.pkg)
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			_ = os.Remove(tmp)
			return fmt.Errorf("build %s: %v\n%s", b.pkg, err, out)
		}
		if b.out == tmp {
			if err := os.Rename(tmp, filepath.Join(embedDir, "hutch-agent")); err != nil {
				return err
			}
		}
	}
	return nil
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// requireGvisor skips a test when runsc is not here.
func requireGvisor(t *testing.T) {
	t.Helper()
	if runscBin == "" {
		t.Skip("gVisor tests need runsc: make runsc (./setup --deps builds it)")
	}
}

// forEachRuntime runs test once per runtime, as a subtest named after it.
// Without runsc the gvisor subtest is skipped, saying so.
func forEachRuntime(t *testing.T, test func(t *testing.T, runtime string)) {
	eachRuntime(t, false, test)
}

// forEachRuntimeParallel is forEachRuntime with the subtests in parallel:
// for tests that start their daemon inside the subtest, and measure no
// CPU or memory.
func forEachRuntimeParallel(t *testing.T, test func(t *testing.T, runtime string)) {
	eachRuntime(t, true, test)
}

func eachRuntime(t *testing.T, parallel bool, test func(t *testing.T, runtime string)) {
	for _, rt := range []string{"runc", "gvisor"} {
		t.Run(rt, func(t *testing.T) {
			if rt == "gvisor" {
				requireGvisor(t)
			}
			if parallel {
				t.Parallel()
			}
			test(t, rt)
		})
	}
}

// packageCache is where the tests' template builds keep Debian packages,
// as a host's builds do in its data dir.
const packageCache = "/var/cache/hutch-e2e/debs"

// daemon is a `hutch serve` the test started.
type daemon struct {
	t       *testing.T
	dataDir string
	runDir  string
	addr    string
	// e2bAddr is where its E2B sandbox front listens (--e2b-listen): a
	// port of its own, since a daemon ./setup started holds the default.
	e2bAddr string
	key     string
	cmd     *exec.Cmd
	logPath string
	flags   []string // more flags for hutch serve
	// derivedRunDir starts the daemon without --run-dir: runDir is then
	// the one hutch serve derives from the data dir.
	derivedRunDir bool
	// netns, when set, is the network namespace (a path) the daemon runs
	// in, as if on a host of its own (cluster_test.go).
	netns string
	// keyFile, when set, holds its API key (--api-key-file), instead of
	// api.key in its data dir.
	keyFile string
	// nodeName is its --node-name, when it is a node among others: it
	// holds (and its cleanup deletes) only its own sandboxes.
	nodeName string
	// env is added to its environment.
	env    []string
	client *client.Client
	// sandboxIDs are every sandbox made through create or the CLI, to check
	// at the end that none left anything behind.
	sandboxIDs []string
	// lastExecs are the last few commands exec ran and what they ended
	// with, printed after the daemon's log when the test fails: CI shows
	// only the end of a failed test's output, and that end is the log.
	lastExecs struct {
		sync.Mutex
		lines []string
	}
}

// keptExecs is how many of its last commands a daemon's test keeps.
const keptExecs = 3

// create makes a sandbox and remembers it for the leak check.
func (d *daemon) create(req client.CreateSandboxRequest) *client.Sandbox {
	d.t.Helper()
	sb, err := d.client.CreateSandbox(d.t.Context(), req)
	if err != nil {
		d.t.Fatalf("create sandbox: %v", err)
	}
	d.sandboxIDs = append(d.sandboxIDs, sb.ID)
	return sb
}

// exec runs a shell command in a sandbox and returns its result.
func (d *daemon) exec(id, command string) *client.ExecResult {
	d.t.Helper()
	res, err := d.client.Exec(d.t.Context(), id, client.ExecRequest{Command: command})
	line := fmt.Sprintf("%s: %q: %v", id, command, err)
	if err == nil {
		b, _ := json.Marshal(res)
		line = fmt.Sprintf("%s: %q: %s", id, command, b)
	}
	d.lastExecs.Lock()
	d.lastExecs.lines = append(d.lastExecs.lines, line)
	if n := len(d.lastExecs.lines); n > keptExecs {
		d.lastExecs.lines = d.lastExecs.lines[n-keptExecs:]
	}
	d.lastExecs.Unlock()
	if err != nil {
		d.t.Fatalf("exec %q: %v", command, err)
	}
	return res
}

// cli runs the hutch CLI against this daemon.
func (d *daemon) cli(stdin string, args ...string) (stdout, stderr string, code int) {
	d.t.Helper()
	cmd := exec.CommandContext(d.t.Context(), hutchBin, args...)
	cmd.Env = append(os.Environ(), "HUTCH_URL=http://"+d.addr, "HUTCH_API_KEY="+d.key)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code = cmd.ProcessState.ExitCode()
	if err != nil && code < 0 {
		d.t.Fatalf("run hutch %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// startDaemon starts a daemon on fresh directories and waits until it
// answers. It is stopped, and checked to have left nothing, at cleanup.
func startDaemon(t *testing.T) *daemon {
	t.Helper()
	return startDaemonWith(t)
}

// startDaemonWith is startDaemon with more flags for hutch serve.
func startDaemonWith(t *testing.T, flags ...string) *daemon {
	t.Helper()
	d := newDaemon(t, flags...)
	d.start()
	return d
}

// newDaemon is startDaemonWith without the start: the caller may change
// the daemon's settings first.
func newDaemon(t *testing.T, flags ...string) *daemon {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
	base, err := os.MkdirTemp("", "hutch-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	// The way to the data dir must be open for runc in sandboxes' user
	// namespaces, as a default data dir's (/var/lib) is.
	if err := os.Chmod(base, 0o711); err != nil {
		t.Fatal(err)
	}
	d := &daemon{
		t:       t,
		dataDir: filepath.Join(base, "data"),
		runDir:  filepath.Join(base, "run"),
		addr:    freeAddr(t),
		e2bAddr: freeAddr(t),
		logPath: filepath.Join(base, "daemon.log"),
		flags:   flags,
	}
	// Registered first, so run last: the test's directories go even when
	// the cleanup below fails half-way (a daemon that does not start
	// again ends it), unless something is still mounted in them.
	t.Cleanup(func() {
		if b, err := os.ReadFile(d.logPath); t.Failed() && err == nil {
			t.Logf("daemon log:\n%s", b)
			d.lastExecs.Lock()
			if len(d.lastExecs.lines) > 0 {
				t.Logf("its last commands (the newest last):\n%s", strings.Join(d.lastExecs.lines, "\n"))
			}
			d.lastExecs.Unlock()
		}
		if left := linesContaining(t, "/proc/self/mountinfo", base); len(left) > 0 {
			t.Errorf("%s kept: mounts are left in it", base)
			return
		}
		if err := os.RemoveAll(base); err != nil {
			t.Errorf("remove test dirs: %v", err)
		}
		if d.derivedRunDir {
			_ = os.RemoveAll(d.runDir)
		}
	})
	t.Cleanup(func() {
		if d.cmd != nil && d.cmd.ProcessState != nil {
			// The test killed the daemon and ended before starting it
			// again; its sandboxes still run and are deleted through it.
			d.start()
		}
		d.stop()
		d.assertNothingLeft()
	})
	return d
}

// derivedRunDir is the run dir hutch serve derives from a data dir other
// than the default one (see internal/app/daemon/lock.go).
func derivedRunDir(dataDir string) string {
	sum := sha256.Sum256([]byte(filepath.Clean(dataDir)))
	return "/run/hutch-" + hex.EncodeToString(sum[:6])
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// start runs the daemon process (again, after a kill) and waits for it.
// The daemon's first start takes other ports when its own were taken
// meanwhile: freeAddr only finds a port free, and a test beside this one
// may bind it before the daemon does.
func (d *daemon) start() {
	d.t.Helper()
	for tries := 1; !d.startOnce(d.client == nil && tries < 3); tries++ {
		d.addr, d.e2bAddr = freeAddr(d.t), freeAddr(d.t)
	}
}

// startOnce is start's one try. With retry, it reports false when the
// daemon ended at once because its address was in use; it fails the test
// for any other reason the daemon did not come up.
func (d *daemon) startOnce(retry bool) bool {
	t := d.t
	t.Helper()
	logf, err := os.OpenFile(d.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	logStart, err := logf.Seek(0, io.SeekEnd)
	if err != nil {
		t.Fatal(err)
	}
	d.cmd = d.serveCommand()
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		keyFile := cmp.Or(d.keyFile, filepath.Join(d.dataDir, "api.key"))
		if key, err := os.ReadFile(keyFile); err == nil {
			d.key = strings.TrimSpace(string(key))
			c, err := client.New("http://"+d.addr, d.key)
			if err != nil {
				t.Fatal(err)
			}
			// Not t.Context(): cleanup starts a killed daemon again,
			// after the test's context has ended.
			hctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, err = c.Health(hctx)
			cancel()
			if err == nil {
				d.client = c
				return true
			}
		}
		if retry && logSince(d.logPath, logStart, "address already in use") {
			_ = d.cmd.Process.Kill() // it is ending, if not already gone
			_ = d.cmd.Wait()
			return false
		}
		if time.Now().After(deadline) {
			_ = d.cmd.Process.Kill() // not left running when the test fails
			_ = d.cmd.Wait()
			b, _ := os.ReadFile(d.logPath)
			t.Fatalf("daemon did not come up; log:\n%s", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// serveCommand is the daemon's command line.
func (d *daemon) serveCommand() *exec.Cmd {
	// runc is the default here; tests ask for gvisor by name.
	// Template builds share one package cache across tests and runs, as
	// builds on one host do: base downloads some 400 packages.
	args := []string{"serve", "--listen", d.addr, "--data-dir", d.dataDir, "--runtime", "runc",
		"--package-cache", packageCache}
	if d.derivedRunDir {
		d.runDir = derivedRunDir(d.dataDir)
	} else {
		args = append(args, "--run-dir", d.runDir)
	}
	if runscBin != "" {
		args = append(args, "--runsc", runscBin)
	}
	args = append(args, "--e2b-listen", d.e2bAddr)
	if d.keyFile != "" {
		args = append(args, "--api-key-file", d.keyFile)
	}
	args = append(args, d.flags...)
	cmd := exec.Command(hutchBin, args...)
	if d.netns != "" {
		// nsenter execs hutch in the namespace: the pid is hutch's.
		cmd = exec.Command("nsenter", append([]string{"--net=" + d.netns, "--", hutchBin}, args...)...)
	}
	if d.env != nil {
		cmd.Env = append(os.Environ(), d.env...)
	}
	return cmd
}

// logSince reports whether the log at path has text after offset.
func logSince(path string, offset int64, text string) bool {
	b, err := os.ReadFile(path)
	return err == nil && int64(len(b)) > offset && strings.Contains(string(b[offset:]), text)
}

// kill ends the daemon with SIGKILL, as a crash would.
func (d *daemon) kill() {
	if err := d.cmd.Process.Kill(); err != nil {
		d.t.Fatal(err)
	}
	_ = d.cmd.Wait() // it reports the kill
}

// stop deletes every sandbox the daemon has, then stops it with SIGTERM.
func (d *daemon) stop() {
	if d.cmd == nil || d.cmd.ProcessState != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if list, err := d.client.ListSandboxes(ctx); err == nil {
		for _, sb := range list {
			if d.nodeName != "" && sb.Node != d.nodeName {
				continue // another node's, deleted through it or a replica
			}
			// One being deleted by itself (an idle delete) may be gone
			// by now; the leak census checks that nothing of it is left.
			if err := d.client.DeleteSandbox(ctx, sb.ID); err != nil && !client.IsNotFound(err) {
				d.t.Errorf("delete sandbox %s at cleanup: %v", sb.ID, err)
			}
		}
	}
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		d.t.Errorf("stop daemon: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- d.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			d.t.Errorf("daemon exited badly after SIGTERM: %v", err)
		}
	case <-time.After(15 * time.Second):
		d.t.Errorf("daemon did not stop within 15 s of SIGTERM")
		_ = d.cmd.Process.Kill()
		<-done
	}
	d.cmd = nil // stopped on purpose: not to be started again at cleanup
}

// assertNothingLeft checks that no sandbox of this daemon left a mount, a
// loop device, a container, a cgroup, a process or a directory. While the
// daemon runs, the disks its pool keeps ready (those no sandbox owns) are
// its own, not left behind.
func (d *daemon) assertNothingLeft() {
	t := d.t
	t.Helper()
	running := d.cmd != nil && d.cmd.ProcessState == nil
	if running {
		d.awaitTeardowns()
	}
	// pooled says whether path, a disk's mount point or image, is of a
	// disk in the pool (see disk.Pool for the layout).
	pooled := func(path string) bool {
		name := strings.TrimSuffix(path, ".img")
		_, err := os.Lstat(name + ".owner")
		return running && filepath.Dir(name) == filepath.Join(d.dataDir, "disks") && errors.Is(err, os.ErrNotExist)
	}
	var mounts []string
	for _, m := range linesContaining(t, "/proc/self/mountinfo", d.dataDir) {
		if fields := strings.Fields(m); len(fields) < 5 || !pooled(fields[4]) {
			mounts = append(mounts, m)
		}
	}
	if len(mounts) > 0 {
		t.Errorf("mounts left behind:\n%s", strings.Join(mounts, "\n"))
	}
	// A disk's loop device goes when its last user does, which the kernel
	// may finish a moment after the unmount (disk.Left waits for it).
	attached := disk.Left(func(image string) bool {
		return strings.HasPrefix(image, d.dataDir) && !pooled(strings.TrimSuffix(image, " (deleted)"))
	})
	for _, image := range attached {
		t.Errorf("loop device left attached to %s", image)
	}
	if entries, _ := os.ReadDir(filepath.Join(d.dataDir, "sandboxes")); len(entries) > 0 {
		t.Errorf("%d sandbox directories left behind", len(entries))
	}
	// Network namespaces (and the link and rules in them), kept as
	// files bind-mounted in the run dir.
	if left, _ := filepath.Glob(filepath.Join(d.runDir, "netns", "*", "*")); len(left) > 0 {
		t.Errorf("network namespaces left behind: %v", left)
	}
	if netns := linesContaining(t, "/proc/self/mountinfo", filepath.Join(d.runDir, "netns")); len(netns) > 0 {
		t.Errorf("network namespace mounts left behind:\n%s", strings.Join(netns, "\n"))
	}
	out, err := exec.Command("runc", "--root", filepath.Join(d.runDir, "runc"), "list", "--quiet").Output()
	if err == nil && strings.TrimSpace(string(out)) != "" {
		t.Errorf("runc containers left behind: %s", out)
	}
	if runscBin != "" {
		out, err := exec.Command(runscBin, "--root", filepath.Join(d.runDir, "runsc"), "list", "--quiet").Output()
		if err == nil && strings.TrimSpace(string(out)) != "" {
			t.Errorf("gVisor containers left behind: %s", out)
		}
	}
	for _, id := range d.sandboxIDs {
		for _, h := range []string{"memory", "pids", "cpu", "unified"} {
			if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", h, "hutch", id)); err == nil {
				t.Errorf("cgroup %s/hutch/%s left behind", h, id)
			}
		}
	}
	if procs := processesOf(t, d.sandboxIDs); len(procs) > 0 {
		t.Errorf("processes left behind: %v", procs)
	}
}

// awaitTeardowns waits until the daemon tears down no deleted sandbox
// any more: a delete answers before its teardown ends.
func (d *daemon) awaitTeardowns() {
	d.t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		h, err := d.client.Health(context.Background())
		if err == nil && h.Deleting == 0 {
			return
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("teardowns still under way after 60 s: %+v, %v", h, err)
		}
	}
}

func linesContaining(t *testing.T, path, s string) []string {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.Contains(sc.Text(), s) {
			out = append(out, sc.Text())
		}
	}
	return out
}

// processesOf lists live host processes still in any of the sandboxes'
// cgroups (zombies have exited: only the host's init can reap them).
func processesOf(t *testing.T, ids []string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		if err != nil {
			continue
		}
		if stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err != nil || strings.Contains(string(stat), ") Z ") {
			continue
		}
		for _, id := range ids {
			if strings.Contains(string(b), "/hutch/"+id) {
				out = append(out, e.Name())
			}
		}
	}
	return out
}

// browser is an HTTP client as a browser is one: cookies kept, every host
// (a preview's name included) dialled at the daemon.
func (d *daemon) browser() *http.Client {
	jar, _ := cookiejar.New(nil)
	dial := func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, d.addr)
	}
	return &http.Client{Jar: jar, Transport: &http.Transport{DialContext: dial}, Timeout: 30 * time.Second}
}

// browserGet fetches u with c and returns the status and the body.
func browserGet(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}
