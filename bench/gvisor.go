package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/runtime/agentclient"
	"github.com/hutchdev/hutch/internal/runtime/oci"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
)

// runscFlags are the global flags Hutch gives runsc, so that the gVisor
// peer runs the same sandbox configuration; its network is loopback only
// (see loadReference).
var runscFlags = append(oci.GvisorConfig("runsc").Flags, "--network=none")

// runscCmd is runsc with a state root and Hutch's flags.
func (b *bench) runscCmd(ctx context.Context, root string, args ...string) *exec.Cmd {
	all := append(append([]string{"--root", root}, runscFlags...), args...)
	return exec.CommandContext(ctx, b.runsc, all...)
}

// runscRoot is the gVisor peer's own state root.
func (b *bench) runscRoot() string { return filepath.Join(b.dir, "runsc") }

// measureGvisorCreate is row (d), row (a) with gVisor: from nothing to the
// first byte of `echo hi`.
//
//   - hutch: POST /v1/sandboxes with "runtime": "gvisor", then the exec as
//     an SSE stream, until the first stdout event.
//   - runsc run: the very bundle Hutch would run under gVisor, with echo as
//     the process and Hutch's runsc flags, in the foreground, until echo's
//     first byte arrives. Making the bundle is not timed, nor the deletes
//     (gVisor takes a second or two to tear a sandbox down here).
//   - runsc run with the agent: the same bundle keeping the agent as its
//     process, `runsc run --detach`, then echo through the agent as soon as
//     it answers: the runtime's and the agent's share of Hutch's figure
//     (runscAgentEcho), where the gap to runsc run is the agent's start.
func (b *bench) measureGvisorCreate(ctx context.Context) (section, error) {
	ref, err := b.reference(ctx, "gvisor")
	if err != nil {
		return section{}, err
	}
	defer ref.close()
	if err := os.MkdirAll(b.runscRoot(), 0o700); err != nil {
		return section{}, err
	}
	var post []time.Duration
	hutch := &peer{name: "hutch (gvisor)", run: func(ctx context.Context) (time.Duration, error) {
		p, f, err := b.hutchCreate(ctx, "gvisor")
		post = append(post, p)
		return f, err
	}}
	seq := 0
	runsc := &peer{name: "runsc run", run: func(ctx context.Context) (time.Duration, error) {
		seq++
		return b.runscRun(ctx, ref, seq)
	}}
	withAgent := &peer{name: "runsc run with the agent", run: func(ctx context.Context) (time.Duration, error) {
		seq++
		return b.runscAgentEcho(ctx, ref, seq)
	}}
	if err := b.interleave(ctx, "(d) gVisor create", b.cfg.gvisorN, hutch, runsc, withAgent); err != nil {
		return section{}, err
	}
	post = post[b.cfg.warmup:]
	r := ratio(median(hutch.samples), median(runsc.samples))
	ra := ratio(median(hutch.samples), median(withAgent.samples))
	res := result{
		ID: "d/create", Topic: topicGvisor, What: "create → first output of `echo hi`",
		Hutch: durationFig("", median(hutch.samples)),
		Peers: []figure{durationFig("`runsc run` of the same bundle", median(runsc.samples)),
			durationFig("the same bundle with the agent as its process, `runsc run --detach`, then echo through the agent (the runtime's and the agent's share)", median(withAgent.samples))},
		Ratio: []term{ratioTerm(r, "`runsc run`").with(r <= 1.2, "≤ 1.2×"), ratioTerm(ra, "the runtime with the agent")},
	}
	// A sandbox answers through its agent, whose start inside gVisor is
	// system calls this host prices (see performance.md): when the runtime
	// with the agent alone is past the target, so is any create.
	if floor := ratio(median(withAgent.samples), median(runsc.samples)); r > 1.2 && floor > 1.2 {
		res.Ratio[0].Target.Note = "beyond this host's floor: the runtime with the agent alone takes " + fmtRatio(floor) + " `runsc run`"
	}
	return section{title: "(d) gVisor: create → first output of `echo hi`", rows: []row{
		durationRow("hutch: create + exec echo (SSE), to first stdout", hutch.samples),
		durationRow("  of which POST /v1/sandboxes", post),
		durationRow("runsc run of the equivalent bundle, to first stdout", runsc.samples),
		durationRow("runsc run --detach of it with the agent, then echo through the agent", withAgent.samples),
		{label: "ratio hutch / runsc run", median: fmtRatio(r), p90: fmtRatio(ratio(p90(hutch.samples), p90(runsc.samples))),
			target: target(r <= 1.2, "≤ 1.2× runsc run")},
		{label: "ratio hutch / runsc run with the agent", median: fmtRatio(ra), p90: fmtRatio(ratio(p90(hutch.samples), p90(withAgent.samples)))},
	}, results: []result{res}}, nil
}

// measureGvisorExec is row (e), row (b) with gVisor: `true` in a running
// gVisor sandbox, through Hutch and through `runsc exec`.
func (b *bench) measureGvisorExec(ctx context.Context) (_ section, err error) {
	sb, err := b.d.client.CreateSandbox(ctx, client.CreateSandboxRequest{Runtime: "gvisor"})
	if err != nil {
		return section{}, fmt.Errorf("create gVisor sandbox: %w", err)
	}
	defer func() { err = errors.Join(err, b.deleteSandbox(ctx, sb.ID)) }()
	hutch := &peer{name: "hutch (gvisor)", run: func(ctx context.Context) (time.Duration, error) {
		return b.hutchExec(ctx, sb.ID)
	}}
	runsc := &peer{name: "runsc exec", run: func(ctx context.Context) (time.Duration, error) {
		return timeRun(b.runscCmd(ctx, b.d.runscRoot(), "exec", containerName(sb.ID), trueBin))
	}}
	stat := b.statPeer(sb.ID)
	// The floor, interleaved with the rest like any peer: this host's
	// speed drifts by the minute, and gVisor's more.
	floor := &peer{name: "inside", run: func(ctx context.Context) (time.Duration, error) {
		return b.forkExecInside(ctx, sb.ID)
	}}
	echo, err := b.callFloor(ctx)
	if err != nil {
		return section{}, err
	}
	defer func() { err = errors.Join(err, echo.close()) }()
	api, err := httpFloor()
	if err != nil {
		return section{}, err
	}
	defer api.close()
	if err := b.interleave(ctx, "(e) gVisor exec", b.cfg.n, hutch, runsc, stat, floor, echo.peer, api.peer); err != nil {
		return section{}, err
	}
	inside := floor.samples
	paired := differences(hutch.samples, inside)
	h, r := median(hutch.samples), median(runsc.samples)
	// What an exec through any HTTP API into the sandbox costs at least:
	// the fork/exec inside, a round trip into the sandbox, and an HTTP
	// round trip on the host.
	least := median(inside) + median(echo.peer.samples) + median(api.peer.samples)
	return section{title: "(e) gVisor: exec round trip of `true` in a running sandbox", rows: []row{
		durationRow("hutch: POST /exec (JSON round trip)", hutch.samples),
		durationRow("runsc exec into the same container", runsc.samples),
		durationRow("fork/exec of true inside the sandbox (bash), the floor", inside),
		durationRow("hutch: GET /files/stat of / (a call through the agent, no process)", stat.samples),
		{label: "hutch median", median: fmtDuration(h), target: target(h <= 5*time.Millisecond, "≤ 5 ms")},
		{label: "ratio runsc exec / hutch", median: fmtRatio(ratio(r, h)), p90: fmtRatio(ratio(p90(runsc.samples), p90(hutch.samples)))},
		{label: "hutch − inside", median: fmtDuration(h - median(inside)), p90: fmtDuration(p90(hutch.samples) - p90(inside)),
			target: target(h-median(inside) <= time.Millisecond, "≤ 1 ms")},
		{label: "  the same, paired by round (drift cancelled)", median: fmtDuration(median(paired)), p90: fmtDuration(p90(paired))},
		{label: "hutch − inside − stat (the exec's own overhead)", median: fmtDuration(h - median(inside) - median(stat.samples))},
		durationRow("a byte's round trip into a sandbox over its host socket", echo.peer.samples),
		durationRow("a minimal HTTP POST round trip on the host (net/http, keep-alive)", api.peer.samples),
		{label: "the floor of an exec through an API: inside + both round trips", median: fmtDuration(least)},
		{label: "hutch − that floor", median: fmtDuration(h - least)},
		{label: "ratio hutch / that floor", median: fmtRatio(ratio(h, least))},
	}, results: gvisorExecResults(h, r, median(inside), least)}, nil
}

// gvisorExecResults are row (e)'s lines of docs/performance.md: Hutch's
// exec against the fork/exec inside, against that and the round trips an
// exec through any API makes (least), and against `runsc exec` (r).
func gvisorExecResults(h, r, inside, least time.Duration) []result {
	const what = "exec round trip of `true`"
	hutch := durationFig("", h)
	floor := durationFig("a shell's fork/exec of `true` inside gVisor", inside)
	extra := h - inside
	return []result{
		{ID: "e/floor", Topic: topicGvisor, What: what, Hutch: hutch, Peers: []figure{floor},
			Ratio: []term{deltaTerm(extra, "").with(extra <= time.Millisecond, "≤ 1 ms")}},
		{ID: "e/least", Topic: topicGvisor, What: "the same, against the fork/exec and both round trips it makes", Hutch: hutch,
			Peers: []figure{
				durationFig("the fork/exec", inside),
				durationFig("a byte's round trip into a gVisor sandbox and a minimal HTTP round trip on the host, together", least-inside),
			},
			Ratio: []term{{Text: fmtRatio(ratio(h, least)) + " (" + fmtDelta(h-least) + ")", Value: ptr(rounded(ratio(h, least), 3))}}},
		{ID: "e/runsc", Topic: topicGvisor, What: what, Hutch: hutch, Peers: []figure{durationFig("`runsc exec`", r)},
			Ratio: []term{ratioTerm(ratio(h, r), "`runsc exec`")}},
	}
}

// httpPeer is a minimal HTTP server on loopback and a peer timing a POST
// to it, a small JSON body in and out over a kept-alive connection: what
// any HTTP API's call costs at least on this host.
type httpPeer struct {
	peer  *peer
	close func()
}

func httpFloor() (*httpPeer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"exit_code":0,"stdout":"","stderr":""}`))
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	hc := &http.Client{Transport: &http.Transport{}}
	url := "http://" + ln.Addr().String() + "/exec"
	return &httpPeer{close: func() { _ = srv.Close(); hc.CloseIdleConnections() }, peer: &peer{name: "http", run: func(ctx context.Context) (time.Duration, error) {
		start := time.Now()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{"cmd":["/usr/bin/true"]}`))
		if err != nil {
			return 0, err
		}
		req.Header.Set("Content-Type", "application/json")
		res, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		_, err = io.Copy(io.Discard, res.Body)
		return time.Since(start), errors.Join(err, res.Body.Close())
	}}}, nil
}

// echoPeer is a server inside a sandbox that sends back each byte it
// reads, on a unix socket in the agent's socket directory, and a peer timing
// a byte's round trip to it from the host over one connection.
type echoPeer struct {
	peer *peer
	conn net.Conn
	stop func() error
}

// echoServer is the sandbox's side of callFloor: Python, which the base
// template has, reading and writing in one thread, so that its own cost per
// byte is a read and a write.
const echoServer = `import os, socket
path = "/.hutch/run/bench-echo.sock"
s = socket.socket(socket.AF_UNIX)
s.bind(path)
os.chmod(path, 0o600)
s.listen(1)
c, _ = s.accept()
while True:
    b = c.recv(1)
    if not b:
        break
    c.sendall(b)
`

// callFloor starts an echo server in a gVisor sandbox of its own and
// connects to it: the floor of any call into a sandbox, which an exec
// through Hutch makes at least once (Hutch's goes the same way: a unix
// socket made inside, that the host sees through gVisor's gofer). Under
// gVisor on this host it is not the kernel's few microseconds: the byte
// wakes a process inside the sandbox and its answer wakes the host's. The
// sandbox is not the one measured: a process started there would hold its
// agent's direct slot, and the execs measured would run under shims.
func (b *bench) callFloor(ctx context.Context) (_ *echoPeer, err error) {
	sb, err := b.d.client.CreateSandbox(ctx, client.CreateSandboxRequest{Runtime: "gvisor"})
	if err != nil {
		return nil, fmt.Errorf("create the echo server's gVisor sandbox: %w", err)
	}
	stop := func() error { return b.deleteSandbox(context.WithoutCancel(ctx), sb.ID) }
	defer func() {
		if err != nil {
			err = errors.Join(err, stop())
		}
	}()
	if _, err := b.d.client.StartProcess(ctx, sb.ID, client.StartProcessRequest{Cmd: []string{"python3", "-c", echoServer}, User: "root"}); err != nil {
		return nil, fmt.Errorf("start the echo server in sandbox %s: %w", sb.ID, err)
	}
	path := filepath.Join(b.d.sandboxDir(sb.ID), "run", "bench-echo.sock")
	var conn net.Conn
	for deadline := time.Now().Add(10 * time.Second); ; {
		if conn, err = net.Dial("unix", path); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("connect to the echo server in sandbox %s: %w", sb.ID, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	buf := []byte{'x'}
	return &echoPeer{conn: conn, stop: stop, peer: &peer{name: "round trip", run: func(context.Context) (time.Duration, error) {
		start := time.Now()
		if _, err := conn.Write(buf); err != nil {
			return 0, err
		}
		if _, err := io.ReadFull(conn, buf); err != nil {
			return 0, err
		}
		return time.Since(start), nil
	}}}, nil
}

func (e *echoPeer) close() error { return errors.Join(e.conn.Close(), e.stop()) }

// forkExecInside times a fork/exec of true by bash inside sandbox id: what
// any exec there costs at least, as row (b)'s bare fork/exec on the host.
// Under gVisor each new address space is work for its platform (systrap:
// host processes and their page tables), which is where most of an exec
// goes. bash forks and execs true twice, and the second is timed: the
// first pays for what bash sets up once.
func (b *bench) forkExecInside(ctx context.Context, id string) (time.Duration, error) {
	script := fmt.Sprintf(`for i in 1 2; do s=$EPOCHREALTIME; %s; e=$EPOCHREALTIME; done; echo "$s $e"`, trueBin)
	res, err := b.d.client.Exec(ctx, id, client.ExecRequest{Cmd: []string{"bash", "-c", script}})
	if err != nil {
		return 0, fmt.Errorf("fork/exec inside sandbox %s: %w", id, err)
	}
	var start, end float64
	if _, err := fmt.Sscan(res.Stdout, &start, &end); err != nil {
		return 0, fmt.Errorf("fork/exec inside sandbox %s: %q (exit %d: %s): %w", id, res.Stdout, res.ExitCode, res.Stderr, err)
	}
	return time.Duration((end - start) * float64(time.Second)), nil
}

// cleanupRunsc deletes whatever the gVisor peer left in its state root.
func (b *bench) cleanupRunsc(ctx context.Context) error {
	if b.runsc == "" {
		return nil
	}
	return deleteContainers(ctx, b.runscCmd, b.runscRoot())
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// runscRun times one `runsc run` of a fresh equivalent bundle.
func (b *bench) runscRun(ctx context.Context, ref *reference, seq int) (_ time.Duration, err error) {
	name := "g" + strconv.Itoa(seq)
	bun, err := ref.prepare(filepath.Join(b.dir, name), name, b.cgroupParent, echoArgs)
	defer func() { err = errors.Join(err, deleteContainer(ctx, b.runscCmd, b.runscRoot(), name), bun.remove()) }()
	if err != nil {
		return 0, fmt.Errorf("prepare bundle %s: %w", name, err)
	}
	return firstOutput(b.runscCmd(ctx, b.runscRoot(), "run", "--bundle", bun.dir, name))
}

// runscAgentEcho times `runsc run --detach` of a fresh equivalent bundle
// that keeps the agent as its process, then echo run through the agent as
// soon as it answers on its socket: the runtime's and the agent's share of
// a Hutch create → first output, none of the daemon's (API, store, disk,
// network).
func (b *bench) runscAgentEcho(ctx context.Context, ref *reference, seq int) (_ time.Duration, err error) {
	name := "ga" + strconv.Itoa(seq)
	bun, err := ref.prepare(filepath.Join(b.dir, name), name, b.cgroupParent, nil)
	defer func() { err = errors.Join(err, deleteContainer(ctx, b.runscCmd, b.runscRoot(), name), bun.remove()) }()
	if err != nil {
		return 0, fmt.Errorf("prepare bundle %s: %w", name, err)
	}
	logf, err := os.Create(filepath.Join(bun.dir, "agent.log")) // as Hutch does
	if err != nil {
		return 0, err
	}
	defer func() { _ = logf.Close() }() // the sandbox has its own copy
	socket := filepath.Join(bun.dir, "run", oci.AgentSocketName)
	agent := agentclient.New(func(ctx context.Context) (net.Conn, error) {
		for {
			var d net.Dialer
			c, err := d.DialContext(ctx, "unix", socket)
			if err == nil || ctx.Err() != nil {
				return c, err
			}
			time.Sleep(time.Millisecond) // not listening yet
		}
	})
	cmd := b.runscCmd(ctx, b.runscRoot(), "run", "--detach", "--bundle", bun.dir, name)
	cmd.Stdout, cmd.Stderr = logf, logf
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("runsc run --detach %s: %w", name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	st, err := agent.Run(ctx, agentclient.Command{Argv: echoArgs, Cwd: "/", User: rootfs.UserName})
	if err == nil && st.Code != 0 {
		err = fmt.Errorf("echo exited %d", st.Code)
	}
	if err != nil {
		return 0, fmt.Errorf("echo through the agent of %s: %w", name, err)
	}
	return time.Since(start), nil
}
