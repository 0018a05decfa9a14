package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/hutchdev/hutch/client"
)

// trueBin is the command of row (b), the same program for every peer.
const trueBin = "/usr/bin/true"

// measureExec is row (b): running `true` in a sandbox that is already
// running, and waiting for it to end.
//
//   - hutch: POST /v1/sandboxes/{id}/exec, JSON in and out: client → daemon
//     → agent (unix socket) → fork/exec in the sandbox → back.
//   - runc exec: the runtime's own way into the same sandbox's container
//     (same namespaces, cgroup, capabilities), which Hutch avoids.
//   - bare: fork/exec of true on the host, no isolation: the floor.
//   - hutch --help, a diagnostic, not a peer: the start-up of the hutch
//     binary on the host, which the agent runs as the shim of every command.
func (b *bench) measureExec(ctx context.Context) (_ section, err error) {
	sb, err := b.d.client.CreateSandbox(ctx, client.CreateSandboxRequest{Runtime: "runc"})
	if err != nil {
		return section{}, fmt.Errorf("create sandbox: %w", err)
	}
	defer func() { err = errors.Join(err, b.deleteSandbox(ctx, sb.ID)) }()

	hutch := &peer{name: "hutch", run: func(ctx context.Context) (time.Duration, error) {
		return b.hutchExec(ctx, sb.ID)
	}}
	runc := &peer{name: "runc exec", run: func(ctx context.Context) (time.Duration, error) {
		return timeRun(b.runcCmd(ctx, b.d.runcRoot(), "exec", containerName(sb.ID), trueBin))
	}}
	bare := &peer{name: "bare", run: func(ctx context.Context) (time.Duration, error) {
		return timeRun(exec.CommandContext(ctx, trueBin))
	}}
	startup := &peer{name: "hutch --help", run: func(ctx context.Context) (time.Duration, error) {
		return timeRun(exec.CommandContext(ctx, b.cfg.hutch, "--help"))
	}}
	stat := b.statPeer(sb.ID)
	if err := b.interleave(ctx, "(b) exec", b.cfg.n, hutch, runc, bare, startup, stat); err != nil {
		return section{}, err
	}
	return execSection(hutch.samples, runc.samples, bare.samples, startup.samples, stat.samples), nil
}

// statPeer times a call into sandbox id that starts no process (a stat of
// its root through the agent): what any call through the agent costs
// before an exec's own work.
func (b *bench) statPeer(id string) *peer {
	return &peer{name: "hutch stat", run: func(ctx context.Context) (time.Duration, error) {
		start := time.Now()
		_, err := b.d.client.StatFile(ctx, id, "/")
		return time.Since(start), err
	}}
}

func execSection(hutch, runc, bare, startup, stat []time.Duration) section {
	h, r := median(hutch), median(runc)
	speedup := ratio(r, h)
	return section{title: "(b) exec round trip of `true` in a running sandbox", rows: []row{
		durationRow("hutch: POST /exec (JSON round trip)", hutch),
		durationRow("runc exec into the same container", runc),
		durationRow("bare fork/exec of /usr/bin/true on the host", bare),
		durationRow("hutch: GET /files/stat of / (a call through the agent, no process)", stat),
		{label: "hutch median", median: fmtDuration(h), target: target(h <= 3*time.Millisecond, "≤ 3 ms")},
		{label: "ratio runc exec / hutch", median: fmtRatio(speedup), p90: fmtRatio(ratio(p90(runc), p90(hutch))),
			target: target(speedup >= 5, "≥ 5× (hutch faster)")},
		{label: "hutch − bare", median: fmtDuration(h - median(bare)), p90: fmtDuration(p90(hutch) - p90(bare))},
		durationRow("for comparison: hutch --help on the host (the shim's start-up)", startup),
	}, results: []result{{
		ID: "b/exec", Topic: topicRunc, What: "exec round trip of `true` in a running sandbox",
		Hutch: durationFig("", h),
		Peers: []figure{durationFig("`runc exec` into the same container", r), durationFig("a bare fork/exec", median(bare))},
		Ratio: []term{
			ratioTerm(ratio(h, r), "`runc exec`").with(speedup >= 5, "≥ 5× faster"),
			deltaTerm(h-median(bare), "over a fork/exec"),
			targetTerm(h <= 3*time.Millisecond, "≤ 3 ms"),
		},
	}}}
}

// hutchExec times one exec through the API.
func (b *bench) hutchExec(ctx context.Context, id string) (time.Duration, error) {
	start := time.Now()
	res, err := b.d.client.Exec(ctx, id, client.ExecRequest{Cmd: []string{trueBin}})
	d := time.Since(start)
	if err != nil {
		return d, fmt.Errorf("exec in sandbox %s: %w", id, err)
	}
	if res.ExitCode != 0 {
		return d, fmt.Errorf("true in sandbox %s: exit code %d: %s", id, res.ExitCode, res.Stderr)
	}
	return d, nil
}

// timeRun times a command from start to exit. Its stderr is the bench's own
// (an *os.File is handed over as is, without a copying goroutine), so that a
// failure shows and the baseline is not inflated.
func timeRun(cmd *exec.Cmd) (time.Duration, error) {
	cmd.Stderr = os.Stderr
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if err != nil {
		return d, fmt.Errorf("%s: %w", strings.Join(cmd.Args, " "), err)
	}
	return d, nil
}
