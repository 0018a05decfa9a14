package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hutchdev/hutch/client"
)

// measureCheckpoint is row (n): checkpoints and rollback, under runc. A
// checkpoint of a sandbox holding 1 GB of files (10 of 100 MB and 2,000
// small ones) and of one holding 10 MB, interleaved, beside the floor: a
// read-only snapshot of the same subvolume made by `btrfs subvolume
// snapshot -r` on the host, which is all a checkpoint does at its heart.
// Then a rollback of the 1 GB sandbox after an `rm -rf` of its files,
// beside a stop and start of the same sandbox, which a rollback is plus
// the swap of subvolumes.
func (b *bench) measureCheckpoint(ctx context.Context) (_ section, err error) {
	if _, err := exec.LookPath("btrfs"); err != nil {
		return section{}, errors.New("row (n) needs btrfs-progs (./setup --deps installs it)")
	}
	big, err := b.d.client.CreateSandbox(ctx, client.CreateSandboxRequest{Runtime: "runc"})
	if err != nil {
		return section{}, fmt.Errorf("create sandbox: %w", err)
	}
	defer func() { err = errors.Join(err, b.deleteSandbox(ctx, big.ID)) }()
	small, err := b.d.client.CreateSandbox(ctx, client.CreateSandboxRequest{Runtime: "runc"})
	if err != nil {
		return section{}, fmt.Errorf("create sandbox: %w", err)
	}
	defer func() { err = errors.Join(err, b.deleteSandbox(ctx, small.ID)) }()
	b.showProgress("(n) checkpoints: writing 1 GB of files")
	for id, script := range map[string]string{
		big.ID:   `mkdir -p work/big work/small && for i in $(seq 1 10); do head -c 100M /dev/urandom > work/big/b$i; done && for i in $(seq 1 2000); do echo $i > work/small/s$i; done && find work -type f | sort | xargs sha256sum > /tmp/manifest && sync`,
		small.ID: `mkdir -p work && for i in $(seq 1 10); do head -c 1M /dev/urandom > work/f$i; done && sync`,
	} {
		res, err := b.d.client.Exec(ctx, id, client.ExecRequest{Command: script, TimeoutS: 300})
		if err != nil || res.ExitCode != 0 {
			return section{}, fmt.Errorf("write the files: %+v, %w", res, err)
		}
	}
	// The floor works on the big sandbox's own subvolume, beside the
	// daemon's checkpoints.
	cur, err := filepath.EvalSymlinks(filepath.Join(b.d.dataDir, "sandboxes", big.ID, "disk"))
	if err != nil {
		return section{}, err
	}
	if filepath.Base(cur) != "cur" {
		return section{}, fmt.Errorf("the sandbox's disk is not btrfs (%s): row (n) needs btrfs-progs on the host", cur)
	}
	floorDir := filepath.Join(filepath.Dir(cur), "checkpoints")
	checkpoint := func(id string) func(context.Context) (time.Duration, error) {
		return func(ctx context.Context) (time.Duration, error) {
			start := time.Now()
			cp, err := b.d.client.CreateCheckpoint(ctx, id, client.CheckpointRequest{})
			took := time.Since(start)
			if err == nil {
				err = b.d.client.DeleteCheckpoint(ctx, id, cp.ID)
			}
			return took, err
		}
	}
	var floorN int
	floor := &peer{name: "btrfs subvolume snapshot -r", run: func(ctx context.Context) (time.Duration, error) {
		floorN++
		snap := filepath.Join(floorDir, "bench"+strconv.Itoa(floorN))
		start := time.Now()
		out, err := exec.CommandContext(ctx, "btrfs", "subvolume", "snapshot", "-r", cur, snap).CombinedOutput()
		took := time.Since(start)
		if err != nil {
			return 0, fmt.Errorf("btrfs subvolume snapshot: %w: %s", err, out)
		}
		if out, err := exec.CommandContext(ctx, "btrfs", "subvolume", "delete", snap).CombinedOutput(); err != nil {
			return 0, fmt.Errorf("btrfs subvolume delete: %w: %s", err, out)
		}
		return took, nil
	}}
	bigCP := &peer{name: "checkpoint, 1 GB", run: checkpoint(big.ID)}
	smallCP := &peer{name: "checkpoint, 10 MB", run: checkpoint(small.ID)}
	if err := b.interleave(ctx, "(n) checkpoints", b.cfg.n, bigCP, smallCP, floor); err != nil {
		return section{}, err
	}

	// Rollback: the files gone, then back; a stop and start beside it.
	cp, err := b.d.client.CreateCheckpoint(ctx, big.ID, client.CheckpointRequest{Name: "bench"})
	if err != nil {
		return section{}, err
	}
	rollback := &peer{name: "rollback, 1 GB", run: func(ctx context.Context) (time.Duration, error) {
		if res, err := b.d.client.Exec(ctx, big.ID, client.ExecRequest{Command: "rm -rf work"}); err != nil || res.ExitCode != 0 {
			return 0, fmt.Errorf("rm -rf: %+v, %w", res, err)
		}
		start := time.Now()
		_, err := b.d.client.RollbackCheckpoint(ctx, big.ID, cp.ID, client.RollbackRequest{})
		return time.Since(start), err
	}}
	restart := &peer{name: "stop and start", run: func(ctx context.Context) (time.Duration, error) {
		start := time.Now()
		if _, err := b.d.client.StopSandbox(ctx, big.ID); err != nil {
			return 0, err
		}
		_, err := b.d.client.StartSandbox(ctx, big.ID)
		return time.Since(start), err
	}}
	n := max(b.cfg.n/5, 5)
	if err := b.interleave(ctx, "(n) rollback", n, rollback, restart); err != nil {
		return section{}, err
	}
	// Every file back, byte for byte.
	if res, err := b.d.client.Exec(ctx, big.ID, client.ExecRequest{Command: "rm -rf work"}); err != nil || res.ExitCode != 0 {
		return section{}, fmt.Errorf("rm -rf: %+v, %w", res, err)
	}
	if _, err := b.d.client.RollbackCheckpoint(ctx, big.ID, cp.ID, client.RollbackRequest{}); err != nil {
		return section{}, err
	}
	res, err := b.d.client.Exec(ctx, big.ID, client.ExecRequest{Command: "sha256sum --quiet -c /tmp/manifest && find work -type f | wc -l", TimeoutS: 300})
	if err != nil || res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != "2010" {
		return section{}, fmt.Errorf("after the rollback the files are not as they were: %+v, %v", res, err)
	}
	if left, _ := filepath.Glob(filepath.Join(floorDir, "bench*")); len(left) > 0 {
		return section{}, fmt.Errorf("floor snapshots left: %v", left)
	}
	return checkpointSection(bigCP.samples, smallCP.samples, floor.samples, rollback.samples, restart.samples), nil
}

const topicCheckpoint = "Checkpoints and rollback"

func checkpointSection(big, small, floor, rollback, restart []time.Duration) section {
	bm, sm, fm, rm, qm := median(big), median(small), median(floor), median(rollback), median(restart)
	growth := ratio(bm, sm)
	return section{title: "(n) checkpoints and rollback, runc", rows: []row{
		durationRow("checkpoint of 1 GB of files (POST …/checkpoints)", big),
		durationRow("checkpoint of 10 MB of files", small),
		durationRow("`btrfs subvolume snapshot -r` of the 1 GB subvolume (floor)", floor),
		{label: "ratio 1 GB / 10 MB", median: fmtRatio(growth), target: target(growth <= 1.5, "≤ 1.5× (cost does not grow with size)")},
		{label: "checkpoint of 1 GB, target", median: fmtDuration(bm), target: target(bm <= 20*time.Millisecond, "≤ 20 ms")},
		durationRow("rollback of 1 GB after rm -rf (POST …/rollback)", rollback),
		durationRow("stop and start of the same sandbox", restart),
		{label: "rollback, target", median: fmtDuration(rm), target: target(rm <= 200*time.Millisecond, "≤ 200 ms")},
	}, results: []result{
		{
			ID: "n/checkpoint", Topic: topicCheckpoint, What: "checkpoint of a running runc sandbox holding 1 GB of files (10 MB: " + fmtDuration(sm) + ")",
			Hutch: durationFig("", bm),
			Peers: []figure{durationFig("`btrfs subvolume snapshot -r` of the same subvolume", fm), durationFig("the same checkpoint of 10 MB of files", sm)},
			Ratio: []term{ratioTerm(ratio(bm, fm), "the snapshot"), ratioTerm(growth, "10 MB").with(growth <= 1.5, "≤ 1.5×"), targetTerm(bm <= 20*time.Millisecond, "≤ 20 ms")},
		},
		{
			ID: "n/rollback", Topic: topicCheckpoint, What: "rollback of that sandbox after `rm -rf` of its files, until it answers again",
			Hutch: durationFig("", rm),
			Peers: []figure{durationFig("a stop and start of the same sandbox", qm)},
			Ratio: []term{ratioTerm(ratio(rm, qm), "stop and start"), targetTerm(rm <= 200*time.Millisecond, "≤ 200 ms")},
		},
	}}
}
