package timerslack

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func slackHere(t *testing.T) int {
	t.Helper()
	v, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// A process started in With has its slack; the thread gets its own back.
func TestWith(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before := slackHere(t)
	var out []byte
	err := With(123_456, func() error {
		var err error
		out, err = exec.Command("cat", "/proc/self/timerslack_ns").Output()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); got != "123456" {
		t.Errorf("the child's slack: %s, want 123456", got)
	}
	if after := slackHere(t); after != before {
		t.Errorf("the thread's slack after With: %d, want %d as before", after, before)
	}
}

// SetProcess reaches every thread, and the threads made after inherit it.
func TestSetProcess(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("setting another thread's slack needs CAP_SYS_NICE (root)")
	}
	t.Cleanup(func() {
		if err := SetProcess(Default); err != nil {
			t.Error(err)
		}
	})
	if err := SetProcess(2_000_000); err != nil {
		t.Fatal(err)
	}
	// A goroutine locked to a thread (a new one if none is idle).
	made := make(chan struct{})
	go func() {
		runtime.LockOSThread() // ends with the goroutine: the thread goes too
		<-made
	}()
	defer close(made)
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		tid, _ := strconv.Atoi(task.Name())
		got, err := Of(tid)
		if err != nil {
			continue // ended meanwhile
		}
		if got != 2_000_000 {
			t.Errorf("thread %d: slack %d, want 2000000", tid, got)
		}
	}
}
