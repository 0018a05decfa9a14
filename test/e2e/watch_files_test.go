package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
)

// rssMiB is a process's resident memory.
func rssMiB(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return kb / 1024
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// A watch of a sandbox's directory sees, in order, a file created,
// written, renamed and removed by a command, under each runtime (inotify
// inside gVisor too); a flood of changes read slowly gives an overflow
// event, after which the watch goes on, and the daemon's memory stays
// flat.
func TestWatchFiles(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	forEachRuntime(t, func(t *testing.T, runtime string) {
		sb := d.create(client.CreateSandboxRequest{Runtime: runtime})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		events := make(chan client.FileEvent, 100000)
		slow := make(chan struct{}) // closed: the watcher reads again
		done := make(chan error, 1)
		go func() {
			stalled := false
			done <- d.client.WatchFiles(ctx, sb.ID, ".", true, func(ev client.FileEvent) error {
				if ev.Op == client.FileWrite && strings.HasSuffix(ev.Path, "/flood/0") && !stalled {
					stalled = true
					<-slow // the first write of the flood: stop reading a while
				}
				events <- ev
				return nil
			})
		}()
		next := func(what string) client.FileEvent {
			t.Helper()
			select {
			case ev := <-events:
				return ev
			case err := <-done:
				t.Fatalf("the watch ended waiting for %s: %v", what, err)
			case <-time.After(30 * time.Second):
				t.Fatalf("no %s event in 30 s", what)
			}
			return client.FileEvent{}
		}
		if ev := next("watching"); ev.Op != client.FileWatching || ev.Path != "/home/user/workspace" {
			t.Fatalf("first event %+v, want watching /home/user/workspace", ev)
		}
		d.exec(sb.ID, "printf hi > a.txt && printf more >> a.txt && mv a.txt b.txt && rm b.txt && mkdir -p sub/deeper && printf x > sub/deeper/c.txt")
		want := []client.FileEvent{
			{Op: "create", Path: "/home/user/workspace/a.txt"},
			{Op: "write", Path: "/home/user/workspace/a.txt"},
			{Op: "rename", Path: "/home/user/workspace/a.txt"},
			{Op: "create", Path: "/home/user/workspace/b.txt"},
			{Op: "remove", Path: "/home/user/workspace/b.txt"},
			{Op: "create", Path: "/home/user/workspace/sub"},
			{Op: "create", Path: "/home/user/workspace/sub/deeper/c.txt"},
		}
		var seen []client.FileEvent
		for i := 0; i < len(want); {
			ev := next(want[i].Op + " " + want[i].Path)
			seen = append(seen, ev)
			if ev == want[i] {
				i++
			}
		}
		for _, ev := range seen {
			if ev.Op == "remove" && strings.HasSuffix(ev.Path, "a.txt") {
				t.Errorf("a.txt was renamed, not removed: %+v", seen)
			}
		}

		// A flood, read slowly: an overflow, then the watch goes on.
		before := rssMiB(t, d.cmd.Process.Pid)
		// 100,000 writes to 500 files (the kernel merges only repeats
		// of one file's event in a row).
		d.exec(sb.ID, `mkdir flood && cd flood && python3 -c "
files = [open(str(i), 'a') for i in range(500)]
for i in range(100000):
    f = files[i % 500]
    f.write('x')
    f.flush()
"`)
		close(slow)
		for next("overflow").Op != client.FileOverflow {
		}
		// The watch goes on. (What the stream still held may bring more
		// of the flood, and overflows, first: a change made now may be
		// lost in one, so the check makes changes until one is seen.)
		arrives := func(name string, within time.Duration) bool {
			deadline := time.After(within)
			for {
				select {
				case ev := <-events:
					if ev.Path == name && ev.Op == client.FileCreate {
						return true
					}
				case err := <-done:
					t.Fatalf("the watch ended after the flood: %v", err)
				case <-deadline:
					return false
				}
			}
		}
		seenAfter := false
		for try := 0; try < 20 && !seenAfter; try++ {
			name := fmt.Sprintf("/home/user/workspace/after-%d.txt", try)
			d.exec(sb.ID, "printf y > "+name)
			seenAfter = arrives(name, 10*time.Second)
		}
		if !seenAfter {
			t.Fatal("after the overflow, the watch saw no change made later")
		}
		if after := rssMiB(t, d.cmd.Process.Pid); after-before > 30 {
			t.Errorf("the daemon's memory grew from %d to %d MiB over the flood", before, after)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the watch: %v", err)
		}
		if err := d.client.DeleteSandbox(t.Context(), sb.ID); err != nil {
			t.Fatal(err)
		}
	})
}
