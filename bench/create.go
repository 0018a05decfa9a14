package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
)

// echoArgs is the first command of a fresh sandbox in row (a), the same
// program for every peer.
var echoArgs = []string{"/usr/bin/echo", "hi"}

// measureCreate is row (a): from nothing to the first byte of output of
// `echo hi` in a new isolated environment.
//
//   - hutch: POST /v1/sandboxes, then the exec as an SSE stream, until the
//     first stdout event reaches the client. Deleting it is not timed.
//   - runc run: the very bundle Hutch would run (its config.json, same
//     template, same writable-layer files) with echo as the process, run in
//     the foreground, until echo's first byte arrives on the pipe. Making the
//     overlay and writing the bundle are not timed, deleting neither.
//   - runc run -d (agent), a diagnostic, not a peer: the same bundle with
//     the agent as its process, detached and handed its socket as Hutch
//     runs it, until the agent answers; what Hutch cannot avoid, beside
//     which Hutch's own time shows its overhead.
//   - unshare: new pid, mount, net, ipc and uts namespaces and echo, no
//     cgroups, no root switch: the floor of what isolation costs.
func (b *bench) measureCreate(ctx context.Context) (section, error) {
	ref, err := b.reference(ctx, "runc")
	if err != nil {
		return section{}, err
	}
	defer ref.close()
	var post, first []time.Duration
	hutch := &peer{name: "hutch", run: func(ctx context.Context) (time.Duration, error) {
		p, f, err := b.hutchCreate(ctx, "runc")
		post, first = append(post, p), append(first, f-p)
		return f, err
	}}
	seq := 0
	runc := &peer{name: "runc run", run: func(ctx context.Context) (time.Duration, error) {
		seq++
		return b.runcRun(ctx, ref, seq)
	}}
	agent := &peer{name: "runc run -d (agent)", run: func(ctx context.Context) (time.Duration, error) {
		seq++
		return b.runcAgentReady(ctx, ref, seq)
	}}
	unshare := &peer{name: "unshare", run: func(ctx context.Context) (time.Duration, error) {
		args := append([]string{"--fork", "--pid", "--mount", "--net", "--ipc", "--uts"}, echoArgs...)
		return firstOutput(exec.CommandContext(ctx, b.unshare, args...))
	}}
	mark := b.d.logSize()
	if err := b.interleave(ctx, "(a) create", b.cfg.createN, hutch, runc, agent, unshare); err != nil {
		return section{}, err
	}
	post, first = post[b.cfg.warmup:], first[b.cfg.warmup:]
	logged, _ := b.d.createDurations(mark)
	logged = logged[max(len(logged)-len(post), 0):] // the timed rounds are the last ones
	return createSection(hutch.samples, post, first, logged, agent.samples, runc.samples, unshare.samples), nil
}

func createSection(hutch, post, first, logged, agent, runc, unshare []time.Duration) section {
	r := ratio(median(hutch), median(runc))
	rows := []row{
		durationRow("hutch: create + exec echo (SSE), to first stdout", hutch),
		durationRow("  of which POST /v1/sandboxes", post),
	}
	if len(logged) > 0 {
		rows = append(rows, durationRow("    of which the daemon's own create (its log)", logged))
	}
	rows = append(rows,
		durationRow("  of which exec → first stdout (the agent starting)", first),
		durationRow("  for comparison: runc run -d until the agent answers", agent),
		durationRow("runc run of the equivalent bundle, to first stdout", runc),
		durationRow("unshare --fork --pid --mount --net --ipc --uts", unshare),
		row{label: "ratio hutch / runc run", median: fmtRatio(r), p90: fmtRatio(ratio(p90(hutch), p90(runc))),
			target: target(r <= 1.3, "≤ 1.3× runc run")},
	)
	return section{title: "(a) create → first output of `echo hi`", rows: rows, results: []result{{
		ID: "a/create", Topic: topicRunc, What: "create → first output of `echo hi`",
		Hutch: durationFig("", median(hutch)),
		Peers: []figure{
			durationFig("`runc run` of the same bundle (same user namespace and idmapped root)", median(runc)),
			durationFig("`unshare --fork --pid --mount --net --ipc --uts`", median(unshare)),
		},
		Ratio: []term{ratioTerm(r, "`runc run`").with(r <= 1.3, "≤ 1.3×")},
	}}}
}

// The topics of docs/performance.md, its tables' headings.
const (
	topicRunc    = "Create and exec under runc"
	topicGvisor  = "Create and exec under gVisor"
	topicMemory  = "Memory and density"
	topicSuspend = "Suspend, resume and fork"
	topicNetwork = "Network"
	topicCode    = "Code contexts"
	topicPreview = "Previews"
	topicE2B     = "E2B compatibility"
	topicCluster = "Scale-out"
	topicObserve = "Observability"
)

// hutchCreate times one sandbox from the create call to the first stdout
// event, returning when the create call answered and when output came.
func (b *bench) hutchCreate(ctx context.Context, runtime string) (post, first time.Duration, err error) {
	return hutchCreate(ctx, b.d.client, runtime)
}

// hutchCreate is a create and its first output through client c.
func hutchCreate(ctx context.Context, c *client.Client, runtime string) (post, first time.Duration, err error) {
	return createWith(ctx, c, client.CreateSandboxRequest{Runtime: runtime})
}

// createWith times a create of req through client c and the first output
// of echo in it, returning when the create call answered and when output
// came; it deletes the sandbox, untimed.
func createWith(ctx context.Context, c *client.Client, req client.CreateSandboxRequest) (post, first time.Duration, err error) {
	start := time.Now()
	sb, err := c.CreateSandbox(ctx, req)
	if err != nil {
		return 0, 0, fmt.Errorf("create sandbox: %w", err)
	}
	post = time.Since(start)
	defer func() { err = errors.Join(err, deleteSandbox(ctx, c, sb.ID)) }()
	first, err = execFirst(ctx, c, sb.ID, start)
	return post, first, err
}

// deleteSandbox deletes a sandbox even when ctx has ended (^C), so that
// nothing is left behind.
func (b *bench) deleteSandbox(ctx context.Context, id string) error {
	return deleteSandbox(ctx, b.d.client, id)
}

func deleteSandbox(ctx context.Context, c *client.Client, id string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := c.DeleteSandbox(ctx, id); err != nil {
		return fmt.Errorf("delete sandbox %s: %w", id, err)
	}
	return nil
}

// reference creates a Hutch sandbox with runtime, copies what its bundle is
// made of, and deletes it.
func (b *bench) reference(ctx context.Context, runtime string) (_ *reference, err error) {
	sb, err := b.d.client.CreateSandbox(ctx, client.CreateSandboxRequest{Runtime: runtime})
	if err != nil {
		return nil, fmt.Errorf("create reference sandbox: %w", err)
	}
	defer func() { err = errors.Join(err, b.deleteSandbox(ctx, sb.ID)) }()
	templates, err := rootfs.Open(filepath.Join(b.d.dataDir, "templates"))
	if err != nil {
		return nil, err
	}
	tmpl, err := templates.Get(sb.Template)
	if err != nil {
		return nil, err
	}
	return loadReference(b.d.sandboxDir(sb.ID), tmpl)
}

// firstOutput starts cmd and returns the time from just before the start to
// the first byte on its stdout. It then drains the output and waits, so the
// process has ended when it returns.
func firstOutput(cmd *exec.Cmd) (time.Duration, error) {
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	cmd.Stderr = os.Stderr // as in timeRun
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	var one [1]byte
	_, rerr := io.ReadFull(stdout, one[:])
	d := time.Since(start)
	_, _ = io.Copy(io.Discard, stdout)
	werr := cmd.Wait()
	if err := errors.Join(rerr, werr); err != nil {
		return d, fmt.Errorf("%s: %w", strings.Join(cmd.Args, " "), err)
	}
	return d, nil
}
