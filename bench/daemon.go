package main

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/cluster"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// daemon is the `hutch serve` this benchmark started on its own directories.
type daemon struct {
	cmd     *exec.Cmd
	exited  chan struct{} // closed when the process has been waited for
	dataDir string
	runDir  string
	logPath string
	client  *client.Client
	version string
	addr    string // the API's, host:port
	key     string // the daemon's own API key
	keyFile string // where it is: api.key in the data dir, or --api-key-file's
	// node: a node daemon (--role node), reached as an API replica reaches
	// it (nodeTransport).
	node bool
}

// startDaemon runs `hutch serve` on a free loopback port with its data and
// run directories under base, and extra flags, and waits until it answers.
func startDaemon(ctx context.Context, bin, runsc, base string, extra ...string) (*daemon, error) {
	return startDaemonEnv(ctx, bin, runsc, base, nil, extra...)
}

// startDaemonEnv is startDaemon with env added to the daemon's
// environment.
func startDaemonEnv(ctx context.Context, bin, runsc, base string, env []string, extra ...string) (*daemon, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	d := &daemon{
		exited:  make(chan struct{}),
		dataDir: filepath.Join(base, "d"),
		runDir:  filepath.Join(base, "r"),
		logPath: filepath.Join(base, "daemon.log"),
	}
	d.keyFile = filepath.Join(d.dataDir, "api.key")
	d.node = slices.Contains(extra, "node") && slices.Contains(extra, "--role")
	if i := slices.Index(extra, "--api-key-file"); i >= 0 && i+1 < len(extra) {
		d.keyFile = extra[i+1]
	}
	logf, err := os.Create(d.logPath)
	if err != nil {
		return nil, err
	}
	defer func() { _ = logf.Close() }() // the daemon has its own copy
	// Its own E2B front, on a free port: a live daemon holds the default.
	args := []string{"serve", "--listen", addr, "--e2b-listen", "127.0.0.1:0", "--data-dir", d.dataDir, "--run-dir", d.runDir}
	if runsc != "" {
		args = append(args, "--runsc", runsc)
	}
	d.cmd = exec.Command(bin, append(args, extra...)...)
	if env != nil {
		d.cmd.Env = append(os.Environ(), env...)
	}
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	// Its own process group: a ^C at the terminal reaches only the bench,
	// which then deletes its sandboxes before it stops the daemon.
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s serve: %w", bin, err)
	}
	go func() {
		_ = d.cmd.Wait()
		close(d.exited)
	}()
	if err := d.waitReady(ctx, addr, 20*time.Second); err != nil {
		return d, fmt.Errorf("%w%s", err, d.logTail())
	}
	return d, nil
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}

// waitReady polls until the API key exists and GET /v1/health answers.
func (d *daemon) waitReady(ctx context.Context, addr string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		if key, err := os.ReadFile(d.keyFile); err == nil {
			c, err := d.clientOf(addr, strings.TrimSpace(string(key)))
			if err != nil {
				return err
			}
			if c != nil { // nil: a node without its certificate yet
				if h, err := c.Health(ctx); err == nil {
					d.client, d.version, d.addr, d.key = c, h.Version, addr, strings.TrimSpace(string(key))
					return nil
				}
			}
		}
		select {
		case <-d.exited:
			return errors.New("daemon exited during start-up")
		case <-ctx.Done():
			return fmt.Errorf("daemon did not answer within %v: %w", timeout, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// clientOf is a client of the daemon at addr with key: over TLS pinned to
// a node's certificate, with the cluster key, as an API replica calls it
// (nil, nil until the node has made its certificate); plain HTTP for the
// other roles.
func (d *daemon) clientOf(addr, key string) (*client.Client, error) {
	if !d.node {
		return client.New("http://"+addr, key)
	}
	b, err := os.ReadFile(filepath.Join(d.dataDir, "cluster-tls.pem"))
	if err != nil {
		return nil, nil // not made yet
	}
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, nil
	}
	n := &store.Node{URL: "https://" + addr, Fingerprint: cluster.Fingerprint(block.Bytes)}
	_, rt, err := cluster.NewNodeTransport(cluster.DeriveKey(key)).To(n, n.URL)
	if err != nil {
		return nil, err
	}
	return client.New(n.URL, key, client.WithHTTPClient(&http.Client{Transport: rt}))
}

// sandboxDir is a sandbox's bundle directory.
func (d *daemon) sandboxDir(id string) string { return filepath.Join(d.dataDir, "sandboxes", id) }

// runcRoot is the daemon's runc state root.
func (d *daemon) runcRoot() string { return filepath.Join(d.runDir, "runc") }

// runscRoot is the daemon's state root for gVisor.
func (d *daemon) runscRoot() string { return filepath.Join(d.runDir, "runsc") }

// containerName is the runc container of a sandbox.
func containerName(id string) string { return "hutch-" + id }

// deleteAll deletes every sandbox the daemon has; they are all this bench's.
// It lists again until none is left, for a create that was still under way
// when the bench was interrupted.
func (d *daemon) deleteAll(ctx context.Context) error {
	if d.client == nil {
		return nil
	}
	for range 5 {
		sbs, err := d.client.ListSandboxes(ctx)
		if err != nil {
			return fmt.Errorf("list sandboxes for cleanup: %w", err)
		}
		if len(sbs) == 0 {
			return nil
		}
		for _, sb := range sbs {
			if err := d.client.DeleteSandbox(ctx, sb.ID); err != nil && !client.IsNotFound(err) {
				return fmt.Errorf("delete sandbox %s: %w", sb.ID, err)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return errors.New("sandboxes keep appearing; some may be left")
}

// stop sends SIGTERM and waits for the daemon to exit, killing it if it
// takes longer than its own shutdown bound allows.
func (d *daemon) stop() error {
	if d.cmd.Process == nil {
		return nil
	}
	select {
	case <-d.exited:
		return errors.New("daemon had exited before the end of the bench" + d.logTail())
	default:
	}
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("stop daemon: %w", err)
	}
	select {
	case <-d.exited:
		return nil
	case <-time.After(20 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.exited
		return errors.New("daemon ignored SIGTERM for 20 s and was killed")
	}
}

// rss is the daemon's resident set size (VmRSS).
func (d *daemon) rss() (int64, error) {
	return procStatusBytes(d.cmd.Process.Pid, "VmRSS")
}

// procStatusBytes reads a "kB" field of /proc/<pid>/status.
func procStatusBytes(pid int, field string) (int64, error) {
	return kBField(fmt.Sprintf("/proc/%d/status", pid), field)
}

// kBField reads a "Name:   123 kB" line of a /proc file, in bytes.
func kBField(path, field string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	n, err := kBFieldOf(string(b), field)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return n, nil
}

// kBFieldOf reads a "Name:   123 kB" line of the text of a /proc file, in
// bytes.
func kBFieldOf(text, field string) (int64, error) {
	for _, line := range strings.Split(text, "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok || name != field {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", field, err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("no %s", field)
}

// logSize is the current length of the daemon's log, a mark for
// createDurations.
func (d *daemon) logSize() int64 {
	fi, err := os.Stat(d.logPath)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// durationAttr finds the duration of a "sandbox created" log line, in slog's
// text (duration=12.3ms) or JSON ("duration":12300000, in ns) form.
var durationAttr = regexp.MustCompile(`"?duration"?[=:]"?([0-9.]+[a-zµ]*)`)

// createDurations returns the durations the daemon logged for the sandboxes
// it created after log offset from: its own view of a create, without HTTP.
func (d *daemon) createDurations(from int64) ([]time.Duration, error) {
	b, err := os.ReadFile(d.logPath)
	if err != nil {
		return nil, err
	}
	if from > int64(len(b)) {
		from = 0
	}
	var out []time.Duration
	for _, line := range strings.Split(string(b[from:]), "\n") {
		if !strings.Contains(line, "sandbox created") {
			continue
		}
		m := durationAttr.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if ns, err := strconv.ParseInt(m[1], 10, 64); err == nil {
			out = append(out, time.Duration(ns))
		} else if dur, err := time.ParseDuration(m[1]); err == nil {
			out = append(out, dur)
		}
	}
	return out, nil
}

// logTail is the end of the daemon's log, for error messages.
func (d *daemon) logTail() string {
	b, err := os.ReadFile(d.logPath)
	if err != nil || len(b) == 0 {
		return ""
	}
	const max = 2048
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return "\ndaemon log (end):\n" + string(b)
}

// logErrors are the first n lines of the daemon's log at level ERROR.
func (d *daemon) logErrors(n int) []string {
	b, err := os.ReadFile(d.logPath)
	if err != nil {
		return nil
	}
	var out []string
	for line := range strings.Lines(string(b)) {
		if strings.Contains(line, "level=ERROR") && len(out) < n {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}
