package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/hutchdev/hutch/internal/agent/agentpb/filesystem"
)

// watchRecorder reads a WatchDir stream in the background.
type watchRecorder struct {
	events     chan *filesystem.FilesystemEvent
	keepalives atomic.Int32
	done       chan struct{}
	err        error // the stream's end, once done is closed
	cancel     context.CancelFunc
}

// watch opens a WatchDir stream and returns once its StartEvent came: the
// directory is watched from then on. The stream ends with the test.
func (a *testAgent) watch(t *testing.T, req *filesystem.WatchDirRequest) *watchRecorder {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	stream, err := a.fs.WatchDir(ctx, connect.NewRequest(req))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if !stream.Receive() || stream.Msg().GetStart() == nil {
		cancel()
		t.Fatalf("no start event: %v", stream.Err())
	}
	r := &watchRecorder{events: make(chan *filesystem.FilesystemEvent, 1024), done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(r.done)
		defer close(r.events)
		for stream.Receive() {
			switch m := stream.Msg(); {
			case m.GetFilesystem() != nil:
				r.events <- m.GetFilesystem()
			case m.GetKeepalive() != nil:
				r.keepalives.Add(1)
			}
		}
		r.err = stream.Err()
		_ = stream.Close()
	}()
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

// until collects events, as "TYPE name", until one is stop; it fails the
// test when the stream ends or nothing comes for a while.
func (r *watchRecorder) until(t *testing.T, stop string) []string {
	t.Helper()
	var got []string
	for {
		select {
		case ev, ok := <-r.events:
			if !ok {
				<-r.done
				t.Fatalf("stream ended before %q: %v; got %q", stop, r.err, got)
			}
			s := strings.TrimPrefix(ev.GetType().String(), "EVENT_TYPE_") + " " + ev.GetName()
			if s == stop {
				return got
			}
			got = append(got, s)
		case <-time.After(10 * time.Second):
			t.Fatalf("no %q; got %q", stop, got)
		}
	}
}

// end waits for the stream to end and returns its error.
func (r *watchRecorder) end(t *testing.T) error {
	t.Helper()
	for {
		select {
		case _, ok := <-r.events:
			if !ok {
				<-r.done
				return r.err
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the stream did not end")
		}
	}
}

// watchErr opens a WatchDir stream that must fail, and returns its error.
func (a *testAgent) watchErr(t *testing.T, req *filesystem.WatchDirRequest) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	stream, err := a.fs.WatchDir(ctx, connect.NewRequest(req))
	if err != nil {
		return err
	}
	defer func() { _ = stream.Close() }()
	if stream.Receive() {
		return fmt.Errorf("unexpected %v", stream.Msg())
	}
	return stream.Err()
}

func mkdirs(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func TestWatchDirEvents(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	outside := t.TempDir()

	type step struct {
		do   func(t *testing.T, dir string)
		want []string // exactly these events, in order
		has  []string // at least these, in any order (a new directory's scan may repeat one)
	}
	tests := []struct {
		name      string
		recursive bool
		setup     func(t *testing.T, dir string)
		steps     []step
	}{
		{name: "file created, written, renamed and removed", steps: []step{{
			do: func(t *testing.T, dir string) {
				writeFile(t, filepath.Join(dir, "f"), "x")
				if err := os.Rename(filepath.Join(dir, "f"), filepath.Join(dir, "g")); err != nil {
					t.Fatal(err)
				}
				if err := os.Remove(filepath.Join(dir, "g")); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"CREATE f", "WRITE f", "RENAME f", "CREATE g", "REMOVE g"},
		}}},
		{name: "chmod", setup: func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "f"), "") }, steps: []step{{
			do: func(t *testing.T, dir string) {
				if err := os.Chmod(filepath.Join(dir, "f"), 0o600); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"CHMOD f"},
		}}},
		{name: "recursive sees a tree made at once", recursive: true, steps: []step{{
			do: func(t *testing.T, dir string) {
				mkdirs(t, filepath.Join(dir, "a/b/c"))
				writeFile(t, filepath.Join(dir, "a/b/c/f"), "x")
			},
			has: []string{"CREATE a", "CREATE a/b", "CREATE a/b/c", "CREATE a/b/c/f"},
		}, {
			do:   func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "a/b/c/f"), "y") },
			want: []string{"WRITE a/b/c/f"},
		}}},
		{name: "non-recursive sees only the directory made", steps: []step{{
			do: func(t *testing.T, dir string) {
				mkdirs(t, filepath.Join(dir, "a/b/c"))
				writeFile(t, filepath.Join(dir, "a/b/c/f"), "x")
			},
			want: []string{"CREATE a"},
		}}},
		{name: "recursive watches what was there", recursive: true, setup: func(t *testing.T, dir string) { mkdirs(t, filepath.Join(dir, "d/e")) }, steps: []step{{
			do:   func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "d/e/f"), "x") },
			want: []string{"CREATE d/e/f", "WRITE d/e/f"},
		}}},
		{name: "directory moved within the tree", recursive: true, setup: func(t *testing.T, dir string) { mkdirs(t, filepath.Join(dir, "d/sub")) }, steps: []step{{
			do: func(t *testing.T, dir string) {
				if err := os.Rename(filepath.Join(dir, "d"), filepath.Join(dir, "e")); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"RENAME d", "CREATE e", "CREATE e/sub"},
		}, {
			do:   func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "e/sub/f"), "x") },
			want: []string{"CREATE e/sub/f", "WRITE e/sub/f"},
		}}},
		{name: "directory moved out", recursive: true, setup: func(t *testing.T, dir string) { mkdirs(t, filepath.Join(dir, "d/sub")) }, steps: []step{{
			do: func(t *testing.T, dir string) {
				if err := os.Rename(filepath.Join(dir, "d"), filepath.Join(outside, "d")); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"RENAME d"},
		}, {
			do:   func(t *testing.T, _ string) { writeFile(t, filepath.Join(outside, "d/sub/f"), "x") },
			want: nil,
		}}},
		{name: "directory moved in", recursive: true, setup: func(t *testing.T, _ string) {
			mkdirs(t, filepath.Join(outside, "m/n"))
			writeFile(t, filepath.Join(outside, "m/n/f"), "")
		}, steps: []step{{
			do: func(t *testing.T, dir string) {
				if err := os.Rename(filepath.Join(outside, "m"), filepath.Join(dir, "m")); err != nil {
					t.Fatal(err)
				}
			},
			has: []string{"CREATE m", "CREATE m/n", "CREATE m/n/f"},
		}, {
			do:   func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "m/n/g"), "x") },
			want: []string{"CREATE m/n/g", "WRITE m/n/g"},
		}}},
		{name: "directory removed and made again", recursive: true, setup: func(t *testing.T, dir string) {
			mkdirs(t, filepath.Join(dir, "d/e"))
			writeFile(t, filepath.Join(dir, "d/e/f"), "")
		}, steps: []step{{
			do: func(t *testing.T, dir string) {
				if err := os.RemoveAll(filepath.Join(dir, "d")); err != nil {
					t.Fatal(err)
				}
			},
			has: []string{"REMOVE d/e/f", "REMOVE d/e", "REMOVE d"},
		}, {
			do:   func(t *testing.T, dir string) { mkdirs(t, filepath.Join(dir, "d")) },
			want: []string{"CREATE d"},
		}, {
			do:   func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "d/x"), "x") },
			want: []string{"CREATE d/x", "WRITE d/x"},
		}}},
		{name: "symlinks are not followed", recursive: true, setup: func(t *testing.T, dir string) {
			mkdirs(t, filepath.Join(outside, "target"))
		}, steps: []step{{
			do: func(t *testing.T, dir string) {
				if err := os.Symlink(filepath.Join(outside, "target"), filepath.Join(dir, "link")); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"CREATE link"},
		}, {
			do:   func(t *testing.T, _ string) { writeFile(t, filepath.Join(outside, "target/f"), "") },
			want: nil,
		}}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rel := fmt.Sprintf("w%d", i)
			dir := filepath.Join(a.home, rel)
			mkdirs(t, dir)
			if tt.setup != nil {
				tt.setup(t, dir)
			}
			// Relative to the user's home, as the other calls.
			r := a.watch(t, &filesystem.WatchDirRequest{Path: rel, Recursive: tt.recursive})
			for n, s := range tt.steps {
				s.do(t, dir)
				// A marker made last, empty (no WRITE): inotify keeps order,
				// so every event of the step comes before it.
				mark := fmt.Sprintf("mark%d", n)
				writeFile(t, filepath.Join(dir, mark), "")
				got := r.until(t, "CREATE "+mark)
				switch {
				case s.has != nil:
					for _, w := range s.has {
						if !slices.Contains(got, w) {
							t.Errorf("step %d: no %q in %q", n, w, got)
						}
					}
				// inotify merges an event into the same one before it only
				// while that is unread: a truncate and a write may come as
				// one WRITE or two, as the reader keeps up.
				case !slices.Equal(slices.Compact(got), s.want):
					t.Errorf("step %d: events %q, want %q", n, got, s.want)
				}
			}
		})
	}
}

func TestWatchDirEntries(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	r := a.watch(t, &filesystem.WatchDirRequest{Path: a.home, IncludeEntry: true})
	writeFile(t, filepath.Join(a.home, "f"), "hello")
	if err := os.Remove(filepath.Join(a.home, "f")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(a.home, "g"), "hi")
	// An entry is what the path is when the event is sent: f may be gone
	// by then, g may still be empty at its CREATE.
	tests := []struct {
		name  string
		typ   filesystem.EventType
		entry string // "no", "maybe", or "yes" (then of size 2)
	}{
		{"f", filesystem.EventType_EVENT_TYPE_CREATE, "maybe"},
		{"f", filesystem.EventType_EVENT_TYPE_WRITE, "maybe"},
		{"f", filesystem.EventType_EVENT_TYPE_REMOVE, "no"},
		{"g", filesystem.EventType_EVENT_TYPE_CREATE, "maybe"},
		{"g", filesystem.EventType_EVENT_TYPE_WRITE, "yes"},
	}
	for _, tt := range tests {
		var ev *filesystem.FilesystemEvent
		select {
		case ev = <-r.events:
		case <-time.After(10 * time.Second):
			t.Fatalf("no %s %s", tt.typ, tt.name)
		}
		if ev.GetName() != tt.name || ev.GetType() != tt.typ {
			t.Fatalf("event %s %s, want %s %s", ev.GetType(), ev.GetName(), tt.typ, tt.name)
		}
		e := ev.GetEntry()
		switch {
		case tt.entry == "no" && e != nil:
			t.Errorf("%s %s has an entry: %v", tt.typ, tt.name, e)
		case tt.entry == "yes" && e.GetSize() != 2:
			t.Errorf("%s %s: entry %v, want one of size 2", tt.typ, tt.name, e)
		case e != nil && (e.GetPath() != filepath.Join(a.home, tt.name) || e.GetType() != filesystem.FileType_FILE_TYPE_FILE || e.GetOwner() != "root"):
			t.Errorf("%s %s: entry %v", tt.typ, tt.name, e)
		}
	}
}

func TestWatchDirErrors(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	writeFile(t, filepath.Join(a.home, "file"), "")
	tests := []struct {
		name string
		req  *filesystem.WatchDirRequest
		code connect.Code
		msg  string
	}{
		{name: "not found", req: &filesystem.WatchDirRequest{Path: "missing"}, code: connect.CodeNotFound,
			msg: filepath.Join(a.home, "missing") + ": no such file or directory"},
		{name: "not a directory", req: &filesystem.WatchDirRequest{Path: "file"}, code: connect.CodeInvalidArgument,
			msg: filepath.Join(a.home, "file") + " is not a directory: only directories can be watched"},
		{name: "under a file", req: &filesystem.WatchDirRequest{Path: "file/x"}, code: connect.CodeInvalidArgument,
			msg: "not a directory"},
		{name: "another user's home", req: &filesystem.WatchDirRequest{Path: "~bob"}, code: connect.CodeInvalidArgument,
			msg: "only ~ and ~/ are expanded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := a.watchErr(t, tt.req)
			if connect.CodeOf(err) != tt.code || !strings.Contains(message(err), tt.msg) {
				t.Errorf("err = %v, want %v containing %q", err, tt.code, tt.msg)
			}
		})
	}
}

// TestWatchTooManyDirs makes the most directories a watch follows, then one
// more.
func TestWatchTooManyDirs(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	many := filepath.Join(a.home, "many")
	for i := range maxWatchDirs - 1 { // with many itself, the most
		mkdirs(t, filepath.Join(many, fmt.Sprint(i)))
	}
	r := a.watch(t, &filesystem.WatchDirRequest{Path: "many", Recursive: true})
	// One at a time: thousands made at once would overflow the queue first,
	// since they come faster than a stream sends their events.
	mkdirs(t, filepath.Join(many, "one-more"))
	want := fmt.Sprintf("watch: more than %d directories under %s; watch a narrower one", maxWatchDirs, many)
	if err := r.end(t); connect.CodeOf(err) != connect.CodeResourceExhausted || message(err) != want {
		t.Errorf("stream ended with %v, want %q", err, want)
	}
	if err := a.watchErr(t, &filesystem.WatchDirRequest{Path: "many", Recursive: true}); connect.CodeOf(err) != connect.CodeResourceExhausted || message(err) != want {
		t.Errorf("new watch: %v, want %q", err, want)
	}
	// Not recursive, a watch follows one directory.
	a.watch(t, &filesystem.WatchDirRequest{Path: "many"})
}

// A watch ends when its directory goes.
func TestWatchDirEnds(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	tests := []struct {
		name string
		do   func(t *testing.T, dir string)
		code connect.Code
		msg  string
	}{
		{name: "directory removed", do: func(t *testing.T, dir string) {
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
		}, code: connect.CodeNotFound, msg: "was removed"},
		{name: "directory moved", do: func(t *testing.T, dir string) {
			if err := os.Rename(dir, dir+".moved"); err != nil {
				t.Fatal(err)
			}
		}, code: connect.CodeNotFound, msg: "was moved away"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(a.home, fmt.Sprint(i))
			mkdirs(t, filepath.Join(dir, "sub"))
			r := a.watch(t, &filesystem.WatchDirRequest{Path: dir, Recursive: true})
			tt.do(t, dir)
			err := r.end(t)
			if connect.CodeOf(err) != tt.code || !strings.Contains(message(err), tt.msg) {
				t.Errorf("err = %v, want %v containing %q", err, tt.code, tt.msg)
			}
		})
	}
}

func TestWatchDirKeepAlive(t *testing.T) {
	t.Parallel()
	a := startAgent(t, func(c *Config) { c.KeepAlive = 20 * time.Millisecond })
	r := a.watch(t, &filesystem.WatchDirRequest{Path: a.home})
	deadline := time.Now().Add(10 * time.Second)
	for r.keepalives.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d keepalives", r.keepalives.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestWatchLimit(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	recs := make([]*watchRecorder, maxWatches)
	for i := range recs {
		recs[i] = a.watch(t, &filesystem.WatchDirRequest{Path: a.home})
	}
	err := a.watchErr(t, &filesystem.WatchDirRequest{Path: a.home})
	if connect.CodeOf(err) != connect.CodeResourceExhausted || !strings.Contains(message(err), fmt.Sprintf("%d watches are already open", maxWatches)) {
		t.Errorf("watch %d: %v", maxWatches+1, err)
	}
	_, err = a.fs.CreateWatcher(t.Context(), connect.NewRequest(&filesystem.CreateWatcherRequest{Path: a.home}))
	if connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Errorf("a watcher beside %d streams: %v", maxWatches, err)
	}
	// A stream that ends gives its place back.
	recs[0].cancel()
	<-recs[0].done
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithCancel(t.Context())
		stream, err := a.fs.WatchDir(ctx, connect.NewRequest(&filesystem.WatchDirRequest{Path: a.home}))
		if err != nil {
			t.Fatal(err)
		}
		ok := stream.Receive()
		err = stream.Err()
		cancel()
		_ = stream.Close()
		if ok {
			break
		}
		if connect.CodeOf(err) != connect.CodeResourceExhausted || time.Now().After(deadline) {
			t.Fatalf("after one ended: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestWatcher(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	ctx := t.Context()
	created, err := a.fs.CreateWatcher(ctx, connect.NewRequest(&filesystem.CreateWatcherRequest{Path: "", Recursive: true, IncludeEntry: true}))
	if err != nil {
		t.Fatal(err)
	}
	id := created.Msg.GetWatcherId()
	mkdirs(t, filepath.Join(a.home, "d"))
	writeFile(t, filepath.Join(a.home, "d/f"), "x")
	var got []string
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Contains(got, "CREATE d/f") {
		if time.Now().After(deadline) {
			t.Fatalf("events %q", got)
		}
		resp, err := a.fs.GetWatcherEvents(ctx, connect.NewRequest(&filesystem.GetWatcherEventsRequest{WatcherId: id}))
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range resp.Msg.GetEvents() {
			got = append(got, strings.TrimPrefix(ev.GetType().String(), "EVENT_TYPE_")+" "+ev.GetName())
			if ev.GetName() == "d" && ev.GetEntry().GetType() != filesystem.FileType_FILE_TYPE_DIRECTORY {
				t.Errorf("entry of d: %v", ev.GetEntry())
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !slices.Contains(got, "CREATE d") {
		t.Errorf("events %q", got)
	}
	if _, err := a.fs.RemoveWatcher(ctx, connect.NewRequest(&filesystem.RemoveWatcherRequest{WatcherId: id})); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		call func() error
		code connect.Code
		msg  string
	}{
		{name: "events of a removed watcher", call: func() error {
			_, err := a.fs.GetWatcherEvents(ctx, connect.NewRequest(&filesystem.GetWatcherEventsRequest{WatcherId: id}))
			return err
		}, code: connect.CodeNotFound, msg: fmt.Sprintf("no watcher %q", id)},
		{name: "remove twice", call: func() error {
			_, err := a.fs.RemoveWatcher(ctx, connect.NewRequest(&filesystem.RemoveWatcherRequest{WatcherId: id}))
			return err
		}, code: connect.CodeNotFound, msg: "it was removed, or not polled for 10m0s"},
		{name: "watch a file", call: func() error {
			writeFile(t, filepath.Join(a.home, "file"), "")
			_, err := a.fs.CreateWatcher(ctx, connect.NewRequest(&filesystem.CreateWatcherRequest{Path: "file"}))
			return err
		}, code: connect.CodeInvalidArgument, msg: "is not a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if connect.CodeOf(err) != tt.code || !strings.Contains(message(err), tt.msg) {
				t.Errorf("err = %v, want %v containing %q", err, tt.code, tt.msg)
			}
		})
	}
}

// The tests below count the process's inotify descriptors and watch
// goroutines: they do not run in parallel (parallel tests wait for them).

// TestWatchOverflow floods a watch whose client does not read: the stream
// must end with an overflow, not grow or hang.
func TestWatchOverflow(t *testing.T) {
	a := startAgent(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	stream, err := a.fs.WatchDir(ctx, connect.NewRequest(&filesystem.WatchDirRequest{Path: a.home}))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stream.Close() }()
	if !stream.Receive() || stream.Msg().GetStart() == nil {
		t.Fatalf("no start: %v", stream.Err())
	}
	const writes = 100_000
	var files []*os.File
	for i := range 4 {
		f, err := os.Create(filepath.Join(a.home, fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		files = append(files, f)
	}
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range writes {
		// Round robin: inotify merges only an event like the one before.
		if _, err := files[i%len(files)].Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond) // the client still does not read
	var after runtime.MemStats
	runtime.ReadMemStats(&after)

	start := time.Now()
	events := 0
	for stream.Receive() {
		if stream.Msg().GetFilesystem() != nil {
			events++
		}
	}
	err = stream.Err()
	if connect.CodeOf(err) != connect.CodeResourceExhausted || !strings.HasPrefix(message(err), overflowPrefix) {
		t.Fatalf("after %d events: %v, want an overflow", events, err)
	}
	t.Logf("%d events, then %q", events, message(err))
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the overflow came %v after the client read again", d)
	}
	if events >= writes/2 {
		t.Errorf("%d of %d events went through the queue", events, writes)
	}
	// What the flood held while the client did not read: the queue, not
	// the events.
	if grew := int64(after.HeapInuse) - int64(before.HeapInuse); grew > 64<<20 {
		t.Errorf("the heap grew by %d MiB during the flood", grew>>20)
	}
	waitWatchesReleased(t)
}

func TestWatchReleases(t *testing.T) {
	tests := []struct {
		name string
		end  func(t *testing.T, a *testAgent, cancel context.CancelFunc)
	}{
		{name: "client cancels", end: func(_ *testing.T, _ *testAgent, cancel context.CancelFunc) { cancel() }},
		{name: "agent stops", end: func(t *testing.T, a *testAgent, _ context.CancelFunc) {
			if err := a.stop(); err != nil {
				t.Error(err)
			}
		}},
		{name: "directory removed", end: func(t *testing.T, a *testAgent, _ context.CancelFunc) {
			if err := os.RemoveAll(filepath.Join(a.home, "w")); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := startAgent(t)
			dir := filepath.Join(a.home, "w")
			mkdirs(t, filepath.Join(dir, "a/b"), filepath.Join(dir, "c"))
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			stream, err := a.fs.WatchDir(ctx, connect.NewRequest(&filesystem.WatchDirRequest{Path: dir, Recursive: true}))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = stream.Close() }()
			if !stream.Receive() {
				t.Fatal(stream.Err())
			}
			writeFile(t, filepath.Join(dir, "a/b/f"), "x")
			if !stream.Receive() || stream.Msg().GetFilesystem().GetName() != "a/b/f" {
				t.Fatalf("%v %v", stream.Msg(), stream.Err())
			}
			if n := inotifyFDs(t); n != 1 {
				t.Errorf("%d inotify descriptors open during the watch", n)
			}
			tt.end(t, a, cancel)
			for stream.Receive() {
			}
			waitWatchesReleased(t)
		})
	}
	t.Run("watcher removed", func(t *testing.T) {
		a := startAgent(t)
		created, err := a.fs.CreateWatcher(t.Context(), connect.NewRequest(&filesystem.CreateWatcherRequest{Path: a.home, Recursive: true}))
		if err != nil {
			t.Fatal(err)
		}
		if n := inotifyFDs(t); n != 1 {
			t.Errorf("%d inotify descriptors open during the watch", n)
		}
		if _, err := a.fs.RemoveWatcher(t.Context(), connect.NewRequest(&filesystem.RemoveWatcherRequest{WatcherId: created.Msg.GetWatcherId()})); err != nil {
			t.Fatal(err)
		}
		waitWatchesReleased(t)
	})
	t.Run("watchers closed", func(t *testing.T) {
		requireRoot(t)
		s := newServer(Config{}.withDefaults())
		t.Cleanup(s.accounts.close)
		dir := t.TempDir()
		for range 3 {
			if _, err := s.fs.CreateWatcher(t.Context(), asUser(connect.NewRequest(&filesystem.CreateWatcherRequest{Path: dir}), "root")); err != nil {
				t.Fatal(err)
			}
		}
		if n := inotifyFDs(t); n != 3 {
			t.Errorf("%d inotify descriptors open for 3 watchers", n)
		}
		s.fs.closeWatchers()
		waitWatchesReleased(t)
		if s.fs.watch.open != 0 || len(s.fs.watch.watchers) != 0 {
			t.Errorf("%d places taken, %d watchers left", s.fs.watch.open, len(s.fs.watch.watchers))
		}
	})
}

// waitWatchesReleased waits for every inotify descriptor and watch goroutine
// of the process to be gone.
func waitWatchesReleased(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		fds, gs := inotifyFDs(t), watchGoroutines()
		if fds == 0 && len(gs) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d inotify descriptors and %d watch goroutines left:\n%s", fds, len(gs), strings.Join(gs, "\n\n"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func inotifyFDs(t *testing.T) int {
	t.Helper()
	des, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, de := range des {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", de.Name())); err == nil && target == "anon_inode:inotify" && !accountWatchFD(de.Name()) {
			n++
		}
	}
	return n
}

// accountWatchFD reports whether inotify descriptor fd is an agent's watch
// of its account files (see accountWatch), which lives as long as its
// agent: every watch it holds has accountEvents' mask.
func accountWatchFD(fd string) bool {
	info, err := os.ReadFile(filepath.Join("/proc/self/fdinfo", fd))
	if err != nil {
		return false
	}
	watches := 0
	for line := range strings.Lines(string(info)) {
		if !strings.HasPrefix(line, "inotify ") {
			continue
		}
		watches++
		if !strings.Contains(line, fmt.Sprintf(" mask:%x ", accountEvents)) {
			return false
		}
	}
	return watches > 0
}

// watchGoroutines returns the stacks of the goroutines that watching runs.
func watchGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "fsnotify") || strings.Contains(g, "(*dirWatch)") || strings.Contains(g, "(*filesystemService).WatchDir") {
			out = append(out, g)
		}
	}
	return out
}

func TestWatchEnd(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		overflow error
		err      error
		code     connect.Code
		msg      string
		sent     int
	}{
		{name: "queue overflow drops what waits", overflow: errQueueFull, code: connect.CodeResourceExhausted,
			msg: "overflow: events came faster than they were read; 4 or more were lost and the watch stopped"},
		{name: "kernel overflow", overflow: errKernelOverflow, code: connect.CodeResourceExhausted,
			msg: "overflow: the sandbox's inotify queue overflowed (fs.inotify.max_queued_events); events were lost and the watch stopped"},
		{name: "other ends send what waits first", err: connect.NewError(connect.CodeNotFound, errors.New("gone")), code: connect.CodeNotFound,
			msg: "gone", sent: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := &dirWatch{root: "/r", events: make(chan watchEvent, 8), overflow: tt.overflow, err: tt.err}
			for _, n := range []string{"a", "b", "c"} {
				d.events <- watchEvent{path: "/r/" + n, typ: filesystem.EventType_EVENT_TYPE_CREATE}
			}
			var sent []string
			err := d.end(func(ev *filesystem.FilesystemEvent) error {
				sent = append(sent, ev.GetName())
				return nil
			}, nil)
			if connect.CodeOf(err) != tt.code || message(err) != tt.msg {
				t.Errorf("err = %v, want %v %q", err, tt.code, tt.msg)
			}
			if len(sent) != tt.sent {
				t.Errorf("sent %q, want %d events", sent, tt.sent)
			}
		})
	}
}
