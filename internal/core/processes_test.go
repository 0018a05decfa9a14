package core

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/base/testclock"
	"github.com/hutchdev/hutch/internal/core/create"
	"github.com/hutchdev/hutch/internal/core/processes"
	"github.com/hutchdev/hutch/internal/runtime/agentclient"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// The core's part of background processes: what it does for them by
// itself around a suspend and a resume, and how they keep a sandbox awake.
// Starting, listing, signalling and restarting them on request is
// internal/core/exec's, tested there.

// startProcess starts background process p in sandbox id as internal/core/exec
// does: started in the sandbox, then recorded, running.
func (d *testDaemon) startProcess(t *testing.T, id string, p store.Process) {
	t.Helper()
	r, release, err := d.m.Acquire(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	p.SandboxID, p.Running, p.CreatedAt = id, true, time.Now().UTC()
	if _, err := processes.Start(t.Context(), r, &p); err != nil {
		t.Fatalf("start process %s: %v", p.Name, err)
	}
	if err := d.db.PutProcess(t.Context(), &p); err != nil {
		t.Fatal(err)
	}
}

// running returns the background processes that run in sandbox id, their
// pids by name; it wakes the sandbox.
func (d *testDaemon) running(t *testing.T, id string) map[string]uint32 {
	t.Helper()
	r, release, err := d.m.Acquire(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	running, err := processes.Running(t.Context(), r)
	if err != nil {
		t.Fatal(err)
	}
	return running
}

// logsOf returns a background process's kept stdout.
func (d *testDaemon) logsOf(t *testing.T, id, name string) string {
	t.Helper()
	r, release, err := d.m.Acquire(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	logs, err := r.Agent().Replay(t.Context(), processes.Tag(name), false)
	if errors.Is(err, errdefs.ErrNotFound) {
		return "" // not started since the agent started
	}
	if err != nil {
		t.Fatalf("logs of %s: %v", name, err)
	}
	defer func() { _ = logs.Close() }()
	var out strings.Builder
	for {
		ev, err := logs.Recv()
		if errors.Is(err, io.EOF) || err == nil && ev.Exit != nil {
			return out.String()
		}
		if err != nil {
			t.Fatalf("logs of %s: %v", name, err)
		}
		if ev.Stream == agentclient.Stdout {
			out.Write(ev.Data)
		}
	}
}

// A background process keeps its sandbox awake past the idle timeout; a
// suspend notes that it ran, and the resume starts it again with its env;
// ended, it no longer keeps the sandbox awake.
func TestBackgroundProcesses(t *testing.T) {
	t.Parallel()
	clock := testclock.New()
	d := newDaemonState(t).start(t, withClock(clock))
	ctx := t.Context()
	sb := d.create(t, create.Options{IdleTimeout: time.Second, Env: map[string]string{"FROM_SANDBOX": "sb"}})
	d.startProcess(t, sb.ID, store.Process{
		Name: "web", Argv: []string{"/bin/sh", "-c", `echo "started $TOKEN $FROM_SANDBOX"; exec sleep 600`},
		Cwd: d.backend.Root(sb.ID) + rootfs.Workspace, Env: map[string]string{"TOKEN": "s3cret"},
	})
	waitFor(t, "the process's first output", func() bool { return d.logsOf(t, sb.ID, "web") == "started s3cret sb\n" })

	// Past its idle timeout, the sandbox stays awake while the process runs.
	d.tickAfter(t, clock, 2*time.Second)
	if got, _ := d.m.Get(ctx, sb.ID); got.State != store.Running {
		t.Fatalf("a sandbox running a background process is %s (%s)", got.State, got.StateReason)
	}
	act, err := d.m.Activity(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !act.Busy || !slices.ContainsFunc(act.Reasons, func(r string) bool { return strings.Contains(r, `background process "web"`) }) || !act.ActionAt.IsZero() {
		t.Errorf("activity of a busy sandbox: %+v", act)
	}

	// A suspend ends it, noting that it ran; the resume starts it again
	// with its env.
	if _, err := d.m.Halt(ctx, sb.ID, Halt{Reason: "suspended by request"}); err != nil {
		t.Fatal(err)
	}
	if procs, err := d.db.ListProcesses(ctx, sb.ID); err != nil || len(procs) != 1 || !procs[0].Running {
		t.Errorf("recorded while suspended: %v, %v; want web, running", procs, err)
	}
	if act, err := d.m.Activity(ctx, sb.ID); err != nil || act.Busy || act.State != store.Suspended {
		t.Errorf("activity of a suspended sandbox: %+v, %v; want not busy, without waking it", act, err)
	}
	if _, err := d.m.Resume(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if pid := d.running(t, sb.ID)["web"]; pid == 0 {
		t.Error("the process does not run after the resume")
	}
	waitFor(t, "the restarted process's output", func() bool { return d.logsOf(t, sb.ID, "web") == "started s3cret sb\n" })

	// Ended by a signal, it no longer keeps the sandbox awake.
	r, release, err := d.m.Acquire(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	err = r.Agent().Signal(ctx, agentclient.Tag(processes.Tag("web")), syscall.SIGTERM)
	release()
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the process to exit", func() bool { _, ok := d.running(t, sb.ID)["web"]; return !ok })
	d.tickAfter(t, clock, 2*time.Second)
	if got, _ := d.m.Get(ctx, sb.ID); got.State != store.Suspended {
		t.Errorf("idle with no process running: %s, want suspended", got.State)
	}
	if err := d.m.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
}

// A service (a background process with a port) does not keep its sandbox
// awake by running: the idle timer suspends it, and the resume (a call, or
// a request to its preview) starts it again.
func TestServiceIsNotActivity(t *testing.T) {
	t.Parallel()
	clock := testclock.New()
	d := newDaemonState(t).start(t, withClock(clock))
	ctx := t.Context()
	sb := d.create(t, create.Options{IdleTimeout: time.Second})
	d.startProcess(t, sb.ID, store.Process{Name: "web", Argv: []string{"sleep", "600"}, Cwd: d.backend.Root(sb.ID) + rootfs.Workspace, Port: 8000})
	if act, err := d.m.Activity(ctx, sb.ID); err != nil || act.Busy {
		t.Errorf("activity with only a service running: %+v, %v; want idle", act, err)
	}
	d.tickAfter(t, clock, 2*time.Second)
	if got, _ := d.m.Get(ctx, sb.ID); got.State != store.Suspended {
		t.Fatalf("idle with a service running: %s, want suspended", got.State)
	}
	if _, err := d.m.Resume(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if pid := d.running(t, sb.ID)["web"]; pid == 0 {
		t.Error("the service does not run after the resume")
	}
	if err := d.m.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Files given at create are in the workspace, the sandbox user's, before
// the first command; paths out of the workspace are refused.
func TestCreateWithFiles(t *testing.T) {
	t.Parallel()
	d := newDaemonState(t).start(t)
	ctx := t.Context()
	sb := d.create(t, create.Options{Files: map[string]string{
		"notes.txt":                              "hello\n",
		"src/app/main.py":                        "print(1)\n",
		rootfs.Workspace + "/data/absolute.json": "{}",
	}})
	root := d.backend.Root(sb.ID) + rootfs.Workspace
	out, _, err := d.exec(t, sb.ID, execRequest{Command: `cat notes.txt src/app/main.py data/absolute.json; echo; stat -c '%u %a %n' src src/app src/app/main.py`})
	want := "hello\nprint(1)\n{}\n1000 755 src\n1000 755 src/app\n1000 644 src/app/main.py\n"
	if err != nil || out != want {
		t.Errorf("in the workspace %s: %q, %v; want %q", root, out, err, want)
	}
	if err := d.m.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	// A tar, unpacked before the map is laid over it.
	sb = d.create(t, create.Options{Files: map[string]string{"notes.txt": "from the map\n"}, FilesTar: scriptTar(t)})
	out, _, err = d.exec(t, sb.ID, execRequest{Command: `cat notes.txt; sh bin/tool; stat -c '%u %a %F' bin/run.sh bin/tool`})
	want = "from the map\nfrom the tar\n1000 755 regular file\n1000 777 symbolic link\n"
	if err != nil || out != want {
		t.Errorf("from the tar: %q, %v; want %q", out, err, want)
	}
	if err := d.m.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []map[string]string{
		{"../escape": "x"},
		{"/etc/passwd": "x"},
		{"": "x"},
		{"a": "file", "a/b": "under a file"},
	} {
		if _, err := d.m.create(ctx, create.Options{Files: bad}); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("files %v: %v, want invalid argument", bad, err)
		}
	}
}

// scriptTar is a gzipped tar of bin/run.sh, a script, and bin/tool, a
// symlink to it.
func scriptTar(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	script := "echo from the tar\n"
	for _, h := range []tar.Header{
		{Name: "bin/run.sh", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(script))},
		{Name: "bin/tool", Typeflag: tar.TypeSymlink, Linkname: "run.sh"},
	} {
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			if _, err := tw.Write([]byte(script)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := errors.Join(tw.Close(), zw.Close()); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
