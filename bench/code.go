package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hutchdev/hutch/client"
)

// Row (i): code in a code context (a Jupyter kernel in the sandbox),
// against the same code sent to the same kind of kernel in the same
// sandbox with no Hutch in front: jupyter_client, the client Jupyter's own
// tools use, run inside the sandbox next to the kernel. Both need
// ipykernel in the sandbox: the default (host) template has the host's,
// which ./setup --deps installs.

// codeBlock is how many calls each peer makes in a turn: the direct peer
// times a block inside the sandbox, in one exec.
const codeBlock = 10

// codeCell is the code both peers run: an expression, so that the kernel
// answers with a result as well as its reply.
const codeCell = "1+1"

// directWarm times codeBlock executes of codeCell against a running kernel,
// whose connection file is argv[1], and prints the durations in seconds as
// a JSON list. The client connects before the timing starts.
const directWarm = `import json, sys, time
from jupyter_client import BlockingKernelClient
kc = BlockingKernelClient(connection_file=sys.argv[1])
kc.load_connection_file()
kc.start_channels()
kc.wait_for_ready(timeout=60)
def run(code):
    msg_id = kc.execute(code)
    reply = idle = False
    while not (reply and idle):
        if not reply:
            reply = kc.get_shell_msg(timeout=60)["parent_header"].get("msg_id") == msg_id
        m = kc.get_iopub_msg(timeout=60)
        idle = idle or (m["parent_header"].get("msg_id") == msg_id and m["msg_type"] == "status" and m["content"]["execution_state"] == "idle")
out = []
for _ in range(int(sys.argv[2])):
    t = time.perf_counter()
    run(sys.argv[3])
    out.append(time.perf_counter() - t)
kc.stop_channels()
print(json.dumps(out))`

// directFirst starts a kernel with jupyter_client and runs codeCell in it,
// timing both, and prints the time in seconds. jupyter_client's first
// look at the host's addresses is left out of the time: it resolves the
// host name, which in a sandbox without DNS waits ~20 s for the resolver.
const directFirst = `import sys, time
from jupyter_client.localinterfaces import local_ips
from jupyter_client.manager import start_new_kernel
local_ips()
t = time.perf_counter()
km, kc = start_new_kernel(kernel_name="python3")
kc.execute_interactive(sys.argv[1], timeout=60, output_hook=lambda msg: None)
print(time.perf_counter() - t)
kc.stop_channels()
km.shutdown_kernel(now=True)`

// measureCode is row (i): a code call's round trip in a warm context, and
// a context's first call (its kernel's start included).
func (b *bench) measureCode(ctx context.Context) (_ section, err error) {
	sb, err := b.d.client.CreateSandbox(ctx, client.CreateSandboxRequest{Runtime: "runc"})
	if err != nil {
		return section{}, fmt.Errorf("create sandbox: %w", err)
	}
	defer func() { err = errors.Join(err, b.deleteSandbox(ctx, sb.ID)) }()
	cx, err := b.d.client.CreateContext(ctx, sb.ID, client.CreateContextRequest{Language: "python"})
	if err != nil {
		return section{}, fmt.Errorf("create a python context (the sandbox needs ipykernel: ./setup --deps installs it on the host): %w", err)
	}
	conn, err := b.startKernel(ctx, sb.ID)
	if err != nil {
		return section{}, err
	}

	// Blocks of calls, in turns, the first turns untimed; the peers
	// alternate in who goes first.
	var warmHutch, warmDirect []time.Duration
	hutchBlock := func(ctx context.Context) ([]time.Duration, error) {
		var times []time.Duration
		for range codeBlock {
			start := time.Now()
			res, err := b.d.client.RunInContext(ctx, sb.ID, client.CodeRequest{ContextID: cx.ID, Code: codeCell})
			times = append(times, time.Since(start))
			if err != nil {
				return nil, err
			}
			if m := res.MainResult(); m == nil || m.Text("text/plain") != "2" {
				return nil, fmt.Errorf("%s gave %+v", codeCell, res)
			}
		}
		return times, nil
	}
	directBlock := func(ctx context.Context) ([]time.Duration, error) {
		return b.pythonTimes(ctx, sb.ID, directWarm, conn, fmt.Sprint(codeBlock), codeCell)
	}
	rounds := max(b.cfg.n/codeBlock, 1)
	for i := range b.cfg.warmup + rounds {
		b.showProgress("(i) code, warm: round %d/%d (%d warm-up)", i+1, b.cfg.warmup+rounds, b.cfg.warmup)
		type block struct {
			run  func(context.Context) ([]time.Duration, error)
			into *[]time.Duration
		}
		blocks := []block{{hutchBlock, &warmHutch}, {directBlock, &warmDirect}}
		if i%2 == 1 {
			blocks[0], blocks[1] = blocks[1], blocks[0]
		}
		for _, bl := range blocks {
			times, err := bl.run(ctx)
			if err != nil {
				return section{}, fmt.Errorf("(i) code, warm: %w", err)
			}
			if i >= b.cfg.warmup {
				*bl.into = append(*bl.into, times...)
			}
		}
	}
	b.endProgress()

	firstHutch := &peer{name: "hutch", run: func(ctx context.Context) (time.Duration, error) {
		start := time.Now()
		c, err := b.d.client.CreateContext(ctx, sb.ID, client.CreateContextRequest{Language: "python"})
		if err != nil {
			return 0, err
		}
		_, err = b.d.client.RunInContext(ctx, sb.ID, client.CodeRequest{ContextID: c.ID, Code: codeCell})
		d := time.Since(start)
		return d, errors.Join(err, b.d.client.DeleteContext(ctx, sb.ID, c.ID))
	}}
	firstDirect := &peer{name: "direct", run: func(ctx context.Context) (time.Duration, error) {
		times, err := b.pythonTimes(ctx, sb.ID, directFirst, codeCell)
		if err != nil || len(times) != 1 {
			return 0, errors.Join(err, fmt.Errorf("the direct first call printed %d times", len(times)))
		}
		return times[0], nil
	}}
	if err := b.interleave(ctx, "(i) code, first call", min(b.cfg.createN, 10), firstHutch, firstDirect); err != nil {
		return section{}, err
	}
	return codeSection(warmHutch, warmDirect, firstHutch.samples, firstDirect.samples), nil
}

func codeSection(hutch, direct, firstHutch, firstDirect []time.Duration) section {
	r := ratio(median(hutch), median(direct))
	return section{title: "(i) code in a warm python context: `" + codeCell + "` and its result", rows: []row{
		durationRow("hutch: POST /code with context_id (JSON round trip)", hutch),
		durationRow("direct: jupyter_client in the sandbox, to a kernel there", direct),
		{label: "ratio hutch / direct", median: fmtRatio(r), p90: fmtRatio(ratio(p90(hutch), p90(direct))), target: target(r <= 2, "≤ 2×")},
		durationRow("first call: hutch create context + POST /code", firstHutch),
		durationRow("first call: jupyter_client start_new_kernel + execute", firstDirect),
		{label: "ratio first call hutch / direct", median: fmtRatio(ratio(median(firstHutch), median(firstDirect)))},
	}, results: []result{
		{ID: "i/warm", Topic: topicCode, What: "`" + codeCell + "` and its result in a warm python context, `POST /code` with `context_id`, runc",
			Hutch: durationFig("", median(hutch)),
			Peers: []figure{durationFig("the same code to an ipykernel in the same sandbox through jupyter_client, no Hutch in front", median(direct))},
			Ratio: []term{ratioTerm(r, "").with(r <= 2, "≤ 2×")}},
		{ID: "i/first", Topic: topicCode, What: "a context's first call: create the context, then `" + codeCell + "`",
			Hutch: durationFig("", median(firstHutch)),
			Peers: []figure{durationFig("jupyter_client's `start_new_kernel` and the same execute in the sandbox", median(firstDirect))},
			Ratio: []term{ratioTerm(ratio(median(firstHutch), median(firstDirect)), "")}},
	}}
}

// startKernel starts ipykernel in sandbox id as a background process
// and returns its connection file once the kernel has written it.
func (b *bench) startKernel(ctx context.Context, id string) (string, error) {
	const conn = "/tmp/hutch-bench-kernel.json"
	if _, err := b.d.client.StartProcess(ctx, id, client.StartProcessRequest{
		Name: "kernel", Cmd: []string{"python3", "-m", "ipykernel_launcher", "-f", conn, "--HistoryManager.enabled=False"},
	}); err != nil {
		return "", fmt.Errorf("start a kernel: %w", err)
	}
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		res, err := b.d.client.Exec(ctx, id, client.ExecRequest{Cmd: []string{"test", "-s", conn}})
		if err != nil {
			return "", err
		}
		if res.ExitCode == 0 {
			return conn, nil
		}
	}
	return "", errors.New("the kernel wrote no connection file within 60 s")
}

// pythonTimes runs a Python script in sandbox id and reads the times it
// prints: a JSON list, or one number, in seconds.
func (b *bench) pythonTimes(ctx context.Context, id, script string, args ...string) ([]time.Duration, error) {
	res, err := b.d.client.Exec(ctx, id, client.ExecRequest{Cmd: append([]string{"python3", "-c", script}, args...)})
	if err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		return nil, fmt.Errorf("python3 exited %d: %s", res.ExitCode, res.Stderr)
	}
	out := strings.TrimSpace(res.Stdout)
	if !strings.HasPrefix(out, "[") {
		out = "[" + out + "]"
	}
	var secs []float64
	if err := json.Unmarshal([]byte(out), &secs); err != nil {
		return nil, fmt.Errorf("the script printed %q: %w", res.Stdout, err)
	}
	times := make([]time.Duration, len(secs))
	for i, s := range secs {
		times[i] = time.Duration(s * float64(time.Second))
	}
	return times, nil
}
