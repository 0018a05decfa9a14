package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hutchdev/hutch/client"
)

// holder64 is a background process holding 64 MiB of touched memory: what
// row (g) suspends and resumes under gVisor.
const holder64 = `import os, time
b = bytearray(os.urandom(1 << 20)) * 64
print(len(b), flush=True)
time.sleep(1 << 30)`

// measureSuspend is row (g): suspend, and resume → first output of `echo
// hi`, of one sandbox over and over, beside a cold create → first output of
// the same runtime, which is what a resume saves, and a fork of the
// sandbox (its files, 10 MB of them its own) → first output in the copy. Under runc the sandbox
// holds only files; under gVisor it also runs a background Python process
// holding 64 MiB, which the resume and the fork bring back.
func (b *bench) measureSuspend(ctx context.Context) (section, error) {
	s := section{title: "(g) suspend, resume and fork: one sandbox, resumed or forked → first output of `echo hi`, beside a cold create"}
	runtimes := []string{"runc"}
	if b.runsc != "" && b.cfg.gvisorN > 0 {
		runtimes = append(runtimes, "gvisor")
	}
	for _, rt := range runtimes {
		rows, results, err := b.suspendRows(ctx, rt)
		if err != nil {
			return section{}, err
		}
		s.rows, s.results = append(s.rows, rows...), append(s.results, results...)
	}
	return s, nil
}

// suspendRows is row (g) for one runtime: its lines in the printed table
// and in docs/performance.md.
func (b *bench) suspendRows(ctx context.Context, runtime string) (_ []row, _ []result, err error) {
	c := b.d.client
	sb, err := c.CreateSandbox(ctx, client.CreateSandboxRequest{Runtime: runtime})
	if err != nil {
		return nil, nil, fmt.Errorf("create sandbox: %w", err)
	}
	defer func() { err = errors.Join(err, deleteSandbox(ctx, c, sb.ID)) }()
	if _, err := c.Exec(ctx, sb.ID, client.ExecRequest{Command: "head -c 10000000 /dev/urandom > state.bin"}); err != nil {
		return nil, nil, err
	}
	what := "files only"
	if runtime == "gvisor" {
		what = "files + a 64 MiB process"
		if _, err := c.StartProcess(ctx, sb.ID, client.StartProcessRequest{Name: "holder", Cmd: []string{"python3", "-c", holder64}}); err != nil {
			return nil, nil, err
		}
	}
	n := b.cfg.createN
	if runtime == "gvisor" {
		n = b.cfg.gvisorN
	}
	var suspends []time.Duration
	resume := &peer{name: "resume", run: func(ctx context.Context) (time.Duration, error) {
		start := time.Now()
		if _, err := c.SuspendSandbox(ctx, sb.ID); err != nil {
			return 0, err
		}
		suspends = append(suspends, time.Since(start))
		start = time.Now()
		if _, err := c.ResumeSandbox(ctx, sb.ID); err != nil {
			return 0, err
		}
		return firstEcho(ctx, c, sb.ID, start)
	}}
	create := &peer{name: "create", run: func(ctx context.Context) (time.Duration, error) {
		_, first, err := hutchCreate(ctx, c, runtime)
		return first, err
	}}
	fork := &peer{name: "fork", run: func(ctx context.Context) (first time.Duration, err error) {
		start := time.Now()
		made, err := c.ForkSandbox(ctx, sb.ID, 1)
		if err != nil {
			return 0, err
		}
		defer func() { err = errors.Join(err, deleteSandbox(ctx, c, made[0].ID)) }()
		return firstEcho(ctx, c, made[0].ID, start)
	}}
	peers := []*peer{resume, create, fork}
	var restore *peer
	if runtime == "gvisor" {
		rp, err := b.newRestorePeer(ctx)
		if err != nil {
			return nil, nil, err
		}
		defer rp.close()
		restore = &peer{name: "runsc restore", run: rp.run}
		peers = append(peers, restore)
	}
	if err := b.interleave(ctx, "(g) suspend/resume/fork "+runtime, n, peers...); err != nil {
		return nil, nil, err
	}
	m := median(resume.samples)
	limit, want := 100*time.Millisecond, "≤ 100 ms"
	if runtime == "gvisor" {
		limit, want = 300*time.Millisecond, "≤ 300 ms"
	}
	rows := []row{
		durationRow(fmt.Sprintf("hutch (%s, %s): POST suspend", runtime, what), suspends[b.cfg.warmup:]),
		durationRow(fmt.Sprintf("hutch (%s): POST resume + exec echo, to first stdout", runtime), resume.samples),
		durationRow(fmt.Sprintf("hutch (%s): cold create + exec echo, to first stdout", runtime), create.samples),
		{label: "  ratio resume / cold create", median: fmtRatio(ratio(m, median(create.samples)))},
	}
	if restore != nil {
		r := median(restore.samples)
		rows = append(rows,
			durationRow("runsc restore of the equivalent bundle's checkpoint (64 MiB), until runsc exec true works", restore.samples),
			row{label: "  ratio hutch resume / runsc restore", median: fmtRatio(ratio(m, r))},
			row{label: "  runsc restore alone against the target", median: fmtDuration(r), target: target(r <= limit, want)})
	}
	rows = append(rows,
		row{label: "  resume against the target", median: fmtDuration(m), target: target(m <= limit, want)},
		durationRow(fmt.Sprintf("hutch (%s): POST fork (1 copy, %s) + exec echo in it, to first stdout", runtime, what), fork.samples),
		row{label: "  ratio fork / cold create", median: fmtRatio(ratio(median(fork.samples), median(create.samples)))},
	)
	var restored time.Duration
	if restore != nil {
		restored = median(restore.samples)
	}
	return rows, suspendResults(runtime, median(suspends[b.cfg.warmup:]), m, median(create.samples), restored, median(fork.samples), limit, want), nil
}

// suspendResults are row (g)'s lines of docs/performance.md for one
// runtime: a resume beside a cold create (and under gVisor `runsc
// restore`, restored), a suspend, and a fork.
func suspendResults(runtime string, suspend, resume, create, restored, fork, limit time.Duration, want string) []result {
	cold := durationFig("a cold create → first output", create)
	met := resume <= limit
	res := result{ID: "g/resume-" + runtime, Topic: topicSuspend, Hutch: durationFig("", resume), Peers: []figure{cold},
		What:  "resume → first output of `echo hi`, runc (files only)",
		Ratio: []term{ratioTerm(ratio(resume, create), "a cold create").with(met, want)}}
	sus := result{ID: "g/suspend-" + runtime, Topic: topicSuspend, What: "suspend, runc", Hutch: durationFig("", suspend)}
	frk := result{ID: "g/fork-" + runtime, Topic: topicSuspend, Hutch: durationFig("", fork), Peers: []figure{cold},
		What:  "fork (1 copy, 10 MB of files of its own) → first output in the copy, runc",
		Ratio: []term{ratioTerm(ratio(fork, create), "a cold create")}}
	if runtime == "gvisor" {
		res.What = "resume → first output, gVisor, a background Python process holding 64 MiB kept with its memory"
		res.Peers = []figure{durationFig("`runsc restore` of the same checkpoint, until `runsc exec true` works", restored), cold}
		res.Ratio = []term{ratioTerm(ratio(resume, restored), "`runsc restore`").with(met, want)}
		if !met && restored > limit {
			res.Ratio[0].Target.Note = "as by `runsc restore` alone"
		}
		sus.What = "suspend, gVisor (the checkpoint, then the wait for gVisor's process to be reaped)"
		frk.What = "the same under gVisor, the 64 MiB process going on in the copy"
	}
	return []result{res, sus, frk}
}

// firstEcho runs echo in sandbox id and returns how long after start its
// output came.
func firstEcho(ctx context.Context, c *client.Client, id string, start time.Time) (first time.Duration, err error) {
	_, err = c.ExecStream(ctx, id, client.ExecRequest{Cmd: echoArgs}, func(ev client.ExecEvent) error {
		if first == 0 {
			first = time.Since(start)
		}
		return nil
	})
	return first, err
}
