package procexit

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// A process that is not the watcher's child: started through setsid, whose
// own child it is, and which it replaces (exec).
func start(t *testing.T, script string) int {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd.Process.Pid
}

func TestWait(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the proc connector needs root")
	}
	defer goleak.VerifyNone(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer func() { cancel(); time.Sleep(1100 * time.Millisecond) }() // the listener wakes each second
	w := New(ctx, nil)
	if !w.listened {
		t.Skip("the proc connector is not usable here")
	}
	for _, tc := range []struct {
		name   string
		script string
		kill   bool
		want   string
	}{
		{"killed", "exec sleep 100", true, "was killed by signal 9 (SIGKILL)"},
		{"exits", "sleep 0.2; exit 3", false, "exited with code 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pid := start(t, tc.script)
			if tc.kill {
				time.AfterFunc(100*time.Millisecond, func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
			}
			began := time.Now()
			e, err := w.Wait(t.Context(), pid, func() bool { return true })
			if err != nil {
				t.Fatal(err)
			}
			if e.String() != tc.want {
				t.Errorf("Wait: %s, want %s", e, tc.want)
			}
			if d := time.Since(began); d > 2*time.Second {
				t.Errorf("seen after %s", d)
			}
		})
	}
	// Waiting ends with its context, and for a pid that is not the one
	// meant.
	pid := start(t, "exec sleep 100")
	wctx, wcancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer wcancel()
	if _, err := w.Wait(wctx, pid, func() bool { return true }); err == nil {
		t.Error("Wait past its context: no error")
	}
	if e, err := w.Wait(t.Context(), pid, func() bool { return false }); err != nil || e.Known {
		t.Errorf("Wait of another process: %v %v", e, err)
	}
}

// event is a connector message as the kernel sends it: a proc_event of
// kind what about pid and tgid (for an exit, with status 9: SIGKILL).
func event(what, pid, tgid uint32) []byte {
	b := make([]byte, nlmsgHdrLen+cnMsgLen+40)
	binary.NativeEndian.PutUint32(b[0:], uint32(len(b)))
	binary.NativeEndian.PutUint32(b[nlmsgHdrLen:], cnIdxProc)
	binary.NativeEndian.PutUint32(b[nlmsgHdrLen+4:], cnValProc)
	ev := b[nlmsgHdrLen+cnMsgLen:]
	binary.NativeEndian.PutUint32(ev[0:], what)
	binary.NativeEndian.PutUint32(ev[16:], pid)
	binary.NativeEndian.PutUint32(ev[20:], tgid)
	binary.NativeEndian.PutUint32(ev[24:], 9)
	return b
}

// The filter keeps a process's exit and drops the rest, run in x/net's
// BPF interpreter (the kernel's is checked by TestFilterInKernel).
func TestExitFilter(t *testing.T) {
	vm, err := bpf.NewVM(exitFilter())
	if err != nil {
		t.Fatal(err)
	}
	const fork, exec = 0x1, 0x2 // PROC_EVENT_FORK, PROC_EVENT_EXEC
	for _, tc := range []struct {
		name string
		msg  []byte
		keep bool
	}{
		{"a process's exit", event(procEventExit, 4242, 4242), true},
		{"a thread's exit", event(procEventExit, 4243, 4242), false},
		{"a fork", event(fork, 4242, 4242), false},
		{"an exec", event(exec, 4242, 4242), false},
		{"too short for an exit", event(procEventExit, 4242, 4242)[:nlmsgHdrLen+cnMsgLen+20], false},
	} {
		n, err := vm.Run(tc.msg)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if kept := n >= len(tc.msg); kept != tc.keep || (!kept && n != 0) {
			t.Errorf("%s: the filter kept %d of %d bytes; want kept %v", tc.name, n, len(tc.msg), tc.keep)
		}
	}
}

// On the kernel's socket, a process that makes threads, execs and exits is
// heard of once: its exit, with its status.
func TestFilterInKernel(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the proc connector needs root")
	}
	fd, err := listen()
	if err != nil {
		t.Skipf("the proc connector is not usable here: %v", err)
	}
	defer unix.Close(fd)
	tv := unix.Timeval{Usec: 200_000}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}
	// sh forks sleep (a fork, an exec, an exit), then execs sh again
	// (an exec) which exits 3.
	cmd := exec.Command("sh", "-c", "sleep 0.01; exec sh -c 'exit 3'")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	_ = cmd.Wait()
	buf := make([]byte, 64<<10)
	heard := false
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			if heard {
				break // and nothing else came meanwhile
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for b := buf[:n]; len(b) >= nlmsgHdrLen; {
			size := int(binary.NativeEndian.Uint32(b[0:]))
			ev := b[nlmsgHdrLen+cnMsgLen : size]
			b = b[(size+3)&^3:]
			what := binary.NativeEndian.Uint32(ev[0:])
			p, tgid := binary.NativeEndian.Uint32(ev[16:]), binary.NativeEndian.Uint32(ev[20:])
			if what != procEventExit || p != tgid {
				t.Errorf("heard event %#x of pid %d (tgid %d): only processes' exits should pass", what, p, tgid)
			}
			if int(p) == pid {
				heard = true
				if e := fromWaitStatus(unix.WaitStatus(binary.NativeEndian.Uint32(ev[24:]))); e.String() != "exited with code 3" {
					t.Errorf("the exit of %d: %s", pid, e)
				}
			}
		}
	}
	if !heard {
		t.Errorf("the exit of %d was not heard", pid)
	}
}
