package agent

import (
	"errors"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// waitZombie waits until pid is a zombie.
func waitZombie(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if e, ok := readProcStat(pid); ok && e.state == 'Z' {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d did not become a zombie", pid)
		}
		time.Sleep(time.Millisecond)
	}
}

func waitNoProc(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); errors.Is(err, os.ErrNotExist) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d was not reaped", pid)
		}
		time.Sleep(time.Millisecond)
	}
}

// The reaper reaps children it did not start and leaves the exit status of
// those it did (shims) to their waiters.
func TestReaperLeavesKnownChildren(t *testing.T) {
	requireRoot(t)
	r := newReaper(Config{}.withDefaults().Logger)
	known, err := r.spawn("/bin/sh", []string{"sh", "-c", "exit 7"}, &syscall.ProcAttr{}, true)
	if err != nil {
		t.Fatal(err)
	}
	unknown, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	waitZombie(t, known)
	waitZombie(t, unknown)
	r.reapOrphans()
	waitNoProc(t, unknown)
	if e, ok := readProcStat(known); !ok || e.state != 'Z' {
		t.Fatal("the reaper reaped a child it started")
	}
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(known, &ws, 0, nil); err != nil || ws.ExitStatus() != 7 {
		t.Errorf("waiting for the known child: %v, status %d", err, ws.ExitStatus())
	}
	r.forget(known)
}

// Orphans re-parented to the agent (as to PID 1; here to a subreaper) are
// reaped on SIGCHLD while commands run normally. (The orphan here is not a
// command's: it counts as part of the direct tree, so the first command's
// slot stays taken until it ends and the others run under shims.)
func TestReaperReapsOrphans(t *testing.T) {
	a := startAgent(t) // reaping orphans, a child subreaper meanwhile

	// sh exits at once, leaving a sleep that is re-parented to this process.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	parent, err := syscall.ForkExec("/bin/sh", []string{"sh", "-c", "sleep 0.2 & echo $!"}, &syscall.ProcAttr{Files: []uintptr{0, w.Fd(), 2}})
	_ = w.Close()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 32)
	n, _ := r.Read(buf)
	_ = r.Close()
	orphan := parsePids(t, string(buf[:n]))
	for range 20 {
		if res := a.run(t, sh("exit 3")); res.end.GetStatus() != "exit status 3" {
			t.Fatalf("end = %v", res.end)
		}
	}
	waitNoProc(t, parent)
	waitNoProc(t, orphan[0])
}

func TestOnlyAgentAndShims(t *testing.T) {
	kids := map[int]bool{32: true, 40: false} // a shim, and the direct command
	for _, tt := range []struct {
		pids []int
		want bool
	}{
		{[]int{1}, true},
		{[]int{1, 32}, true},
		{[]int{1, 32, 40}, false}, // the direct command, not reaped yet
		{[]int{1, 32, 41}, false}, // what it left behind, or a shim's command
		{[]int{41}, false},
	} {
		if got := onlyAgentAndShims(tt.pids, 1, kids); got != tt.want {
			t.Errorf("onlyAgentAndShims(%v) = %v, want %v", tt.pids, got, tt.want)
		}
	}
}
