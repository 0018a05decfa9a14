package agent

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/hutchdev/hutch/internal/agent/agentpb/hutchagent"
)

const (
	// maxListedFiles bounds the files one call's End lists.
	maxListedFiles = 100
	// maxWalkedEntries bounds the walk that finds them, so that a working
	// directory holding a large tree costs each call little.
	maxWalkedEntries = 5000
	// mtimeSlack is how much older than the call's start a file's
	// modification time may be and still count as written by it: file
	// times come from the kernel's coarse clock, a tick behind.
	mtimeSlack = 10 * time.Millisecond
)

// run runs req's code in its context, sending what the kernel gives and
// then the End. A kernel that died since the last call is restarted
// first, and End says so.
func (x *contexts) run(ctx context.Context, req *hutchagent.RunCodeRequest, send func(*hutchagent.CodeEvent) error) error {
	c, err := x.get(req.GetContextId())
	if err != nil {
		return err
	}
	select {
	case c.turn <- struct{}{}:
	case <-ctx.Done():
		return connect.NewError(connect.CodeCanceled, ctx.Err())
	}
	defer func() { <-c.turn }()

	end := &hutchagent.CodeEnd{}
	k := c.kernel()
	select {
	case <-k.exited():
		if err := x.restartKernel(c); err != nil {
			return err
		}
		end.Restarted, k = true, c.kernel()
	default:
	}

	began := time.Now()
	var timedOut, gaveUp atomic.Bool
	stop := make(chan struct{})
	var wg sync.WaitGroup
	if ms := req.GetTimeoutMs(); ms > 0 {
		wg.Go(func() {
			if !sleep(time.Duration(ms)*time.Millisecond, stop) {
				return
			}
			timedOut.Store(true)
			k.interrupt()
			if sleep(interruptGrace, stop) {
				gaveUp.Store(true)
				k.close()
			}
		})
	}
	count, err := k.execute(ctx, req.GetCode(), send)
	close(stop)
	wg.Wait()

	switch {
	case ctx.Err() != nil:
		k.interrupt() // nobody reads what it gives any more
		return connect.NewError(connect.CodeCanceled, ctx.Err())
	case err != nil && !gaveUp.Load():
		var ce *connect.Error
		if errors.As(err, &ce) && ce.Code() == connect.CodeCanceled {
			return err
		}
		// The kernel died under the code (os._exit, the memory limit):
		// the code's error, and a fresh kernel for the next call.
		ev := &hutchagent.CodeError{Name: "KernelDied", Value: connect.CodeOf(err).String()}
		if errors.As(err, &ce) {
			ev.Value = ce.Message()
		}
		if err := send(&hutchagent.CodeEvent{Event: &hutchagent.CodeEvent_Error{Error: ev}}); err != nil {
			return err
		}
		fallthrough
	case gaveUp.Load():
		if err := x.restartKernel(c); err != nil {
			return err
		}
		end.Restarted = true
	default:
		end.ExecutionCount = count
	}
	end.TimedOut = timedOut.Load()
	if req.GetListFiles() {
		end.Files, end.FilesTruncated = writtenSince(c.dir, began.Add(-mtimeSlack))
	}
	return send(&hutchagent.CodeEvent{Event: &hutchagent.CodeEvent_End{End: end}})
}

// sleep waits d and reports true, or false when stop is closed first.
func sleep(d time.Duration, stop <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-stop:
		return false
	}
}

// skippedDirs are directories the written-files walk does not enter:
// caches and dependencies, not results.
var skippedDirs = []string{"node_modules", "__pycache__", "site-packages", "venv"}

// writtenSince lists the regular files under dir modified at or after
// since, sorted, at most maxListedFiles of them; truncated says there were
// more, or more of the tree than the walk looks at. Hidden files and
// directories are left out.
func writtenSince(dir string, since time.Time) (files []string, truncated bool) {
	walked := 0
	errStop := errors.New("stop")
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable: skipped
		}
		if walked++; walked > maxWalkedEntries {
			truncated = true
			return errStop
		}
		name := d.Name()
		if p != dir && strings.HasPrefix(name, ".") || d.IsDir() && slices.Contains(skippedDirs, name) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if err != nil || fi.ModTime().Before(since) {
			return nil
		}
		if len(files) == maxListedFiles {
			truncated = true
			return errStop
		}
		files = append(files, p)
		return nil
	})
	slices.Sort(files)
	return files, truncated
}

// eventSender serialises a stream's sends: the kernel's output and the
// keepalives come from different goroutines.
type eventSender struct {
	mu   sync.Mutex
	send func(*hutchagent.CodeEvent) error
	sent chan struct{} // poked on each send, to restart the keepalive timer
}

func (s *eventSender) Send(ev *hutchagent.CodeEvent) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case s.sent <- struct{}{}:
	default:
	}
	return s.send(ev)
}

// keepAlive sends a KeepAlive whenever the stream has been silent for
// every, until stop is closed.
func (s *eventSender) keepAlive(every time.Duration, stop <-chan struct{}) {
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-s.sent:
			t.Reset(every)
		case <-t.C:
			if err := s.Send(&hutchagent.CodeEvent{Event: &hutchagent.CodeEvent_Keepalive{Keepalive: &hutchagent.KeepAlive{}}}); err != nil {
				return
			}
		}
	}
}

// removeAll removes a kernel's own directory (its connection file, bash's
// cells), once the kernel is gone.
func removeAll(dir string) {
	if dir != "" {
		_ = os.RemoveAll(dir)
	}
}
