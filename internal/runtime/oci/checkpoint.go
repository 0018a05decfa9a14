package oci

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	agentv1 "github.com/hutchdev/hutch/api/agent/v1"
	"github.com/hutchdev/hutch/internal/runtime/backend"
)

// Checkpoints (Config.Checkpoints, gVisor): a suspend saves the sandbox's
// memory and processes into an image in its directory, and the resume
// restores them, so that a process holding state answers as before.
//
// gVisor cannot save a socket listening on a host path, and the agent's is
// one: the agent closes it before the checkpoint and listens again after
// the restore, told by signals (agentv1.SignalUnlisten, SignalRelisten).
// Connections open at the checkpoint end; the daemon dials again.

// checkpointWait bounds the wait for the agent to close or reopen its
// listener.
const checkpointWait = 5 * time.Second

func (l sandboxLayout) checkpoint() string { return filepath.Join(l.dir, "checkpoint") }

// snapshotting marks a sandbox whose snapshot is under way (see Snapshot).
func (l sandboxLayout) snapshotting() string { return filepath.Join(l.dir, "snapshotting") }

// checkpoint saves sandbox id's memory and processes into its checkpoint
// image. The sandbox stops, whether the checkpoint worked or not.
func (r *Runtime) checkpoint(ctx context.Context, id string, layer sandboxLayout) error {
	img, partial := layer.checkpoint(), layer.checkpoint()+".partial"
	if _, err := os.Stat(img); err == nil {
		// A daemon stopped between the checkpoint and the delete (Recover
		// finishes the suspend): the image stands while nothing runs.
		if st, err := r.state(ctx, id); err != nil || st.Status != "running" {
			return nil
		}
	}
	if err := errors.Join(os.RemoveAll(img), os.RemoveAll(partial)); err != nil {
		return err
	}
	// A frozen agent cannot close its listener: thawed, it can.
	if st, err := r.state(ctx, id); err == nil && st.Status == "paused" {
		if err := r.run(ctx, id, "resume", containerID(id)); err != nil {
			return err
		}
	}
	if err := r.unlisten(ctx, id, layer); err != nil {
		return err
	}
	began := time.Now()
	if err := r.run(ctx, id, "checkpoint", "--image-path", partial, containerID(id)); err != nil {
		return errors.Join(err, os.RemoveAll(partial))
	}
	r.log.Debug("sandbox checkpointed", "sandbox_id", id, "duration", time.Since(began))
	return os.Rename(partial, img)
}

// unlisten has sandbox id's agent close its listener, and waits until it
// has: the sandbox can be checkpointed then.
func (r *Runtime) unlisten(ctx context.Context, id string, layer sandboxLayout) error {
	if err := r.run(ctx, id, "kill", containerID(id), agentv1.SignalUnlisten); err != nil {
		return err
	}
	if err := waitFor(ctx, func() bool { _, err := os.Lstat(layer.socket); return errors.Is(err, os.ErrNotExist) }); err != nil {
		return fmt.Errorf("the agent did not close its listener: %w", err)
	}
	return nil
}

// relisten has a running sandbox's agent listen again, and waits until it
// answers.
func (r *Runtime) relisten(ctx context.Context, h backend.Handle) error {
	if err := r.run(ctx, h.ID, "kill", containerID(h.ID), agentv1.SignalRelisten); err != nil {
		return err
	}
	return r.waitAgent(ctx, h)
}

// restore starts a sandbox, whose root is mounted, from a checkpoint
// image (its own, or a snapshot's), and waits for its agent.
func (r *Runtime) restore(ctx context.Context, h backend.Handle, s backend.Spec, layer sandboxLayout, ns *userNS, image string) error {
	began := time.Now()
	logFile, err := r.writeBundle(s, layer, ns)
	if err != nil {
		return err
	}
	defer logFile.Close()
	// The runtime's output goes to the log: restore --detach hands its
	// stdio to the sandbox, so no pipe may tie it to us.
	cmd := r.command(ctx, "restore", "--detach", "--image-path", image, "--bundle", layer.dir, "--pid-file", layer.pidFile(), containerID(h.ID))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := r.runStart(cmd, layer.dir); err != nil {
		return fmt.Errorf("%s restore: %w%s", r.cfg.Name, err, tailOf(filepath.Join(layer.dir, "agent.log")))
	}
	restored := time.Now()
	if err := layer.unmountIDMapped(); err != nil {
		return err
	}
	if err := r.afterStart(h.ID, layer); err != nil {
		return err
	}
	if err := r.relisten(ctx, h); err != nil {
		return err
	}
	r.log.Debug("sandbox restored", "sandbox_id", h.ID, "image", image, "restore", restored.Sub(began), "agent", time.Since(restored))
	return nil
}

// checkpointRunning writes a frozen sandbox's memory and processes to
// image, leaving the sandbox as it is. A failed checkpoint leaves no image.
func (r *Runtime) checkpointRunning(ctx context.Context, id, image string) error {
	began := time.Now()
	if err := r.run(ctx, id, "checkpoint", "--leave-running", "--image-path", image, containerID(id)); err != nil {
		return errors.Join(err, os.RemoveAll(image))
	}
	// The sandbox's memory holds its secrets: the image is root's alone,
	// though templates are open to be searched.
	// #nosec G302 -- a directory: 0700 is root's alone
	if err := os.Chmod(image, 0o700); err != nil {
		return errors.Join(err, os.RemoveAll(image))
	}
	r.log.Debug("sandbox memory saved", "sandbox_id", id, "duration", time.Since(began))
	return nil
}

// waitFor polls cond every millisecond until it holds, for up to
// checkpointWait.
func waitFor(ctx context.Context, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, checkpointWait)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	return nil
}
