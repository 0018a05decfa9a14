package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hutchdev/hutch/client"
)

// measureForks is row (o): forks by the dozen, under gVisor. A running
// sandbox holding 10 MB of files and a Python process of 64 MiB (row
// (g)'s) is forked into 1 copy and into 20, each going on from its memory,
// timed until the fork call answers with every copy running. The floor
// is what the copies cost gVisor itself: 20 `runsc restore` of a
// checkpoint of the same process, as many at a time as Hutch makes
// copies, each until `runsc exec true` works in it.
func (b *bench) measureForks(ctx context.Context) (_ section, err error) {
	if b.runsc == "" || b.cfg.gvisorN == 0 {
		return section{}, errors.New("row (o) needs runsc (make runsc) and -gvisor-n > 0")
	}
	const copies, atOnce = 20, 4 // atOnce: internal/core/template's forkParallel
	c := b.d.client
	sb, err := c.CreateSandbox(ctx, client.CreateSandboxRequest{Runtime: "gvisor"})
	if err != nil {
		return section{}, fmt.Errorf("create sandbox: %w", err)
	}
	defer func() { err = errors.Join(err, deleteSandbox(ctx, c, sb.ID)) }()
	if res, err := c.Exec(ctx, sb.ID, client.ExecRequest{Command: "head -c 10000000 /dev/urandom > state.bin"}); err != nil || res.ExitCode != 0 {
		return section{}, fmt.Errorf("write the files: %+v, %w", res, err)
	}
	if _, err := c.StartProcess(ctx, sb.ID, client.StartProcessRequest{Name: "holder", Cmd: []string{"python3", "-c", holder64}}); err != nil {
		return section{}, err
	}
	fork := func(n int) func(context.Context) (time.Duration, error) {
		return func(ctx context.Context) (time.Duration, error) {
			start := time.Now()
			res, err := c.Fork(ctx, sb.ID, n)
			took := time.Since(start)
			for _, f := range res.Sandboxes {
				err = errors.Join(err, deleteSandbox(ctx, c, f.ID))
			}
			if err == nil && (len(res.Sandboxes) != n || len(res.Errors) > 0) {
				err = fmt.Errorf("fork × %d made %d copies: %+v", n, len(res.Sandboxes), res.Errors)
			}
			return took, err
		}
	}
	restore, err := b.newRestorePeer(ctx)
	if err != nil {
		return section{}, fmt.Errorf("the floor's checkpoint: %w", err)
	}
	defer restore.close()
	var round int
	floor := &peer{name: "runsc restore × 20", run: func(ctx context.Context) (time.Duration, error) {
		round++
		start := time.Now()
		sem := make(chan struct{}, atOnce)
		errs := make([]error, copies)
		cleanups := make([]func() error, copies)
		var wg sync.WaitGroup
		for i := range copies {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				_, cleanups[i], errs[i] = restore.restore(ctx, fmt.Sprintf("fk%03d-%02d", round, i))
			})
		}
		wg.Wait()
		took := time.Since(start)
		for _, c := range cleanups {
			errs = append(errs, c())
		}
		return took, errors.Join(errs...)
	}}
	one := &peer{name: "fork × 1", run: fork(1)}
	twenty := &peer{name: "fork × 20", run: fork(copies)}
	n := max(b.cfg.gvisorN/5, 3)
	if err := b.interleave(ctx, "(o) forks", n, one, twenty, floor); err != nil {
		return section{}, err
	}
	return forksSection(one.samples, twenty.samples, floor.samples), nil
}

func forksSection(one, twenty, floor []time.Duration) section {
	o, t, f := median(one), median(twenty), median(floor)
	growth := ratio(t, o)
	return section{title: "(o) forks by the dozen, gVisor: a sandbox with a 64 MiB process, forked with its memory", rows: []row{
		durationRow("fork × 1 (POST …/fork, until the copy runs)", one),
		durationRow("fork × 20", twenty),
		durationRow("20 × `runsc restore` of the same process, 4 at a time (floor)", floor),
		{label: "ratio fork × 20 / fork × 1", median: fmtRatio(growth), target: target(growth <= 3, "≤ 3×")},
		{label: "ratio fork × 20 / the floor", median: fmtRatio(ratio(t, f))},
	}, results: []result{{
		ID: "o/fork20", Topic: topicCheckpoint, What: "fork × 20 of a running gVisor sandbox holding a 64 MiB process, every copy going on from its memory (× 1: " + fmtDuration(o) + ")",
		Hutch: durationFig("", t),
		Peers: []figure{durationFig("20 × `runsc restore` of a checkpoint of the same process, 4 at a time", f), durationFig("fork × 1", o)},
		Ratio: []term{ratioTerm(ratio(t, f), "the restores"), growthTerm(growth, ratio(f, o))},
	}}}
}

// growthTerm is fork × 20 against fork × 1 and its target, which says so
// when the floor alone, gVisor's restores, is past it on this host.
func growthTerm(growth, floorGrowth float64) term {
	t := ratioTerm(growth, "fork × 1").with(growth <= 3, "≤ 3×")
	if growth > 3 && floorGrowth > 3 {
		t.Target.Note = fmt.Sprintf("beyond this host's floor: the 20 restores alone take %s a fork × 1", fmtRatio(floorGrowth))
	}
	return t
}
