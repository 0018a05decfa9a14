package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// restorePeer is the peer of row (g)'s gVisor resume: plain `runsc restore`
// of a checkpoint of the equivalent bundle, its process the same Python
// holding 64 MiB, timed until a `runsc exec true` in it works. The
// checkpoint is made once, untimed; each round restores it into a fresh
// bundle of its own (a restore may take another container's image).
type restorePeer struct {
	b     *bench
	ref   *reference
	image string
	seq   int
}

func (b *bench) newRestorePeer(ctx context.Context) (_ *restorePeer, err error) {
	ref, err := b.reference(ctx, "gvisor")
	if err != nil {
		return nil, err
	}
	p := &restorePeer{b: b, ref: ref, image: filepath.Join(b.dir, "restore-image")}
	defer func() {
		if err != nil {
			ref.close()
		}
	}()
	if err := os.MkdirAll(b.runscRoot(), 0o700); err != nil {
		return nil, err
	}
	const name = "ck"
	bun, err := ref.prepare(filepath.Join(b.dir, name), name, b.cgroupParent, []string{"python3", "-c", holder64})
	defer func() { err = errors.Join(err, deleteContainer(ctx, b.runscCmd, b.runscRoot(), name), bun.remove()) }()
	if err != nil {
		return nil, fmt.Errorf("prepare bundle %s: %w", name, err)
	}
	if err := detached(b.runscCmd(ctx, b.runscRoot(), "run", "--detach", "--bundle", bun.dir, name), bun.dir); err != nil {
		return nil, err
	}
	if err := waitRSS(ctx, b, name, 64<<20); err != nil {
		return nil, err
	}
	if out, err := b.runscCmd(ctx, b.runscRoot(), "checkpoint", "--image-path", p.image, name).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("runsc checkpoint: %w: %s", err, out)
	}
	return p, nil
}

// detached runs a runsc command that leaves a container running (run or
// restore --detach). Its output goes to a file in dir, not to a pipe: the
// container inherits the command's stdio, and a pipe would never close.
func detached(cmd *exec.Cmd, dir string) error {
	logPath := filepath.Join(dir, "runsc.log")
	// #nosec G304 -- a file in the bench's own bundle directory
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		out, _ := os.ReadFile(logPath)
		return fmt.Errorf("%s: %w: %s", strings.Join(cmd.Args[len(cmd.Args)-6:], " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// waitRSS waits until the process of container name holds min bytes.
func waitRSS(ctx context.Context, b *bench, name string, min int64) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		out, err := b.runscCmd(ctx, b.runscRoot(), "exec", name, "cat", "/proc/1/status").Output()
		if err == nil {
			if rss, err := kBFieldOf(string(out), "VmRSS"); err == nil && rss >= min {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the checkpoint peer's process never held %d MiB: %w", min>>20, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// run is one timed restore.
func (p *restorePeer) run(ctx context.Context) (time.Duration, error) {
	p.seq++
	took, cleanup, err := p.restore(ctx, "rs"+strconv.Itoa(p.seq))
	return took, errors.Join(err, cleanup())
}

// restore restores the checkpoint as container name, timed until `runsc
// exec true` works in it; cleanup deletes it.
func (p *restorePeer) restore(ctx context.Context, name string) (_ time.Duration, cleanup func() error, err error) {
	b := p.b
	bun, err := p.ref.prepare(filepath.Join(b.dir, name), name, b.cgroupParent, []string{"python3", "-c", holder64})
	cleanup = func() error {
		return errors.Join(deleteContainer(context.WithoutCancel(ctx), b.runscCmd, b.runscRoot(), name), bun.remove())
	}
	if err != nil {
		return 0, cleanup, fmt.Errorf("prepare bundle %s: %w", name, err)
	}
	start := time.Now()
	if err := detached(b.runscCmd(ctx, b.runscRoot(), "restore", "--detach", "--image-path", p.image, "--bundle", bun.dir, name), bun.dir); err != nil {
		return 0, cleanup, err
	}
	for deadline := start.Add(30 * time.Second); ; {
		if err := b.runscCmd(ctx, b.runscRoot(), "exec", name, trueBin).Run(); err == nil {
			return time.Since(start), cleanup, nil
		}
		if time.Now().After(deadline) {
			return 0, cleanup, errors.New("runsc exec never worked in the restored container")
		}
	}
}

func (p *restorePeer) close() { p.ref.close() }
