package agent

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/fsnotify/fsnotify"
	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/internal/agent/agentpb/filesystem"
)

// Watching directories, as envd does: WatchDir streams a directory's changes;
// CreateWatcher, GetWatcherEvents and RemoveWatcher are the same watch polled.
//
// Each watch has its own inotify instance (fsnotify's Watcher) and, when
// recursive, a watch per directory under its root: inotify is not recursive.
// A directory that appears later (made, or moved in) is watched as soon as its
// event is handled, then read, and what is already in it is reported as
// created: files made in it before its watch existed are not missed, though
// some may be reported twice.
//
// What a watch costs is bounded, so that a watch cannot use up the sandbox's
// inotify limits or the agent's memory:
//   - at most maxWatches at once (streams and watchers together);
//   - at most maxWatchDirs directories per watch;
//   - events wait for their reader in a queue of watchQueueLen. When it is
//     full, because the client reads slower than the files change, or when
//     the kernel's own queue overflows, the watch ends with
//     ResourceExhausted and a message starting "overflow:": its reader
//     learns that events were lost and can look again. fsnotify's reader is
//     never held up by a client, only by the watch's own bookkeeping.
const (
	maxWatches    = 16
	maxWatchDirs  = 8192
	watchQueueLen = 4096
	// watcherIdle is how long a polled watcher lives without being polled.
	watcherIdle = 10 * time.Minute
)

// overflowPrefix starts the message of the error that ends an overflowed
// watch; the daemon tells overflow from other ends by it.
const overflowPrefix = "overflow: "

// watches counts the agent's watches and keeps its polled watchers. Its zero
// value is ready to use.
type watches struct {
	mu       sync.Mutex
	open     int
	watchers map[string]*watcher
}

// acquire takes one of the maxWatches places; release gives it back.
func (w *watches) acquire() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.open >= maxWatches {
		return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("%d watches are already open, the most the sandbox allows at once: end one first", maxWatches))
	}
	w.open++
	return nil
}

func (w *watches) release() {
	w.mu.Lock()
	w.open--
	w.mu.Unlock()
}

// startWatch resolves a watch request's path, takes a place and starts
// watching. The watch's stop ends it and gives the place back.
func (f *filesystemService) startWatch(h http.Header, path string, recursive bool) (*dirWatch, error) {
	p, _, err := f.requestPath(h, path)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(p)
	if err != nil {
		return nil, fsError(err)
	}
	if !fi.IsDir() {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s is not a directory: only directories can be watched", p))
	}
	if err := f.watch.acquire(); err != nil {
		return nil, err
	}
	d, err := newDirWatch(p, recursive)
	if err != nil {
		f.watch.release()
		return nil, err
	}
	d.release = f.watch.release
	return d, nil
}

// WatchDir streams a StartEvent, then an event per change under the
// directory, with keepalives when nothing changes, until the client goes
// away or the watch ends (see dirWatch.end).
func (f *filesystemService) WatchDir(ctx context.Context, req *connect.Request[filesystem.WatchDirRequest], stream *connect.ServerStream[filesystem.WatchDirResponse]) error {
	d, err := f.startWatch(req.Header(), req.Msg.GetPath(), req.Msg.GetRecursive())
	if err != nil {
		return err
	}
	defer d.stop()
	var names *idNames
	if req.Msg.GetIncludeEntry() {
		n := f.srv.loadIDNames()
		names = &n
	}
	sendEvent := func(ev *filesystem.FilesystemEvent) error {
		return stream.Send(&filesystem.WatchDirResponse{Event: &filesystem.WatchDirResponse_Filesystem{Filesystem: ev}})
	}
	if err := stream.Send(&filesystem.WatchDirResponse{Event: &filesystem.WatchDirResponse_Start{Start: &filesystem.WatchDirResponse_StartEvent{}}}); err != nil {
		return err
	}
	keepAlive := time.NewTimer(f.srv.cfg.KeepAlive)
	defer keepAlive.Stop()
	for {
		// An overflow ends the stream before the events still queued.
		select {
		case <-d.done:
			return d.end(sendEvent, names)
		default:
		}
		var resp *filesystem.WatchDirResponse
		select {
		case ev := <-d.events:
			resp = &filesystem.WatchDirResponse{Event: &filesystem.WatchDirResponse_Filesystem{Filesystem: d.event(ev, names)}}
		case <-d.done:
			return d.end(sendEvent, names)
		case <-keepAlive.C:
			resp = &filesystem.WatchDirResponse{Event: &filesystem.WatchDirResponse_Keepalive{Keepalive: &filesystem.WatchDirResponse_KeepAlive{}}}
		case <-ctx.Done():
			return ctx.Err()
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
		keepAlive.Reset(f.srv.cfg.KeepAlive)
	}
}

// watchEvent is a change waiting in a watch's queue.
type watchEvent struct {
	path string // absolute
	typ  filesystem.EventType
}

// dirWatch watches one directory and, when recursive, every directory under
// it, with an inotify instance of its own.
//
// Two goroutines run while it lives: fsnotify's, which reads the inotify
// descriptor, and pump, which turns fsnotify's events into watchEvents,
// watches new directories and queues the events without ever waiting for
// the reader. The reader (WatchDir or GetWatcherEvents) takes events from
// events, and stops reading when done is closed (see end). stop releases
// everything.
type dirWatch struct {
	root      string
	recursive bool
	fsw       *fsnotify.Watcher
	release   func() // gives the watch's place back; set by startWatch

	events chan watchEvent // the bounded queue, pump → reader
	done   chan struct{}   // closed when the pump ended the watch
	pumped chan struct{}   // closed when the pump has returned
	// Set by the pump before it closes done: why the watch ended.
	err      error
	overflow error // errQueueFull or errKernelOverflow (then err is nil)
	stopOnce sync.Once

	// The pump's own.
	dirs     map[string]struct{} // the directories watched
	movedDir string              // a watched directory just renamed (see handle)
}

// newDirWatch watches root (and, recursive, the directories under it) and
// starts its pump. The caller must call stop.
func newDirWatch(root string, recursive bool) (*dirWatch, error) {
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		if errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE) {
			return nil, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("watch %s: no inotify instance to be had (%w): the sandbox's fs.inotify.max_user_instances is reached; end a watch or raise the limit", root, err))
		}
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("watch %s: %w", root, err))
	}
	d := &dirWatch{
		root:      root,
		recursive: recursive,
		fsw:       fsw,
		events:    make(chan watchEvent, watchQueueLen),
		done:      make(chan struct{}),
		pumped:    make(chan struct{}),
		dirs:      map[string]struct{}{},
	}
	if err := d.addTree(root, false); err != nil {
		_ = fsw.Close()
		return nil, err
	}
	go d.pump()
	return d, nil
}

// stop ends the watch: it closes the inotify instance and waits for the
// pump and fsnotify's goroutine to return, then gives the place back.
func (d *dirWatch) stop() {
	d.stopOnce.Do(func() {
		_ = d.fsw.Close() // waits for fsnotify's goroutine, unless the pump's Close does
		<-d.pumped
		if d.release != nil {
			d.release()
		}
	})
}

// pump handles fsnotify's events until the watcher is closed or the watch
// ends itself.
func (d *dirWatch) pump() {
	defer close(d.pumped)
	for {
		select {
		case ev, ok := <-d.fsw.Events:
			if !ok {
				return
			}
			if err := d.handle(ev); err != nil {
				d.fail(err)
				return
			}
		case err, ok := <-d.fsw.Errors:
			if !ok {
				return
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				err = errKernelOverflow
			} else {
				err = connect.NewError(connect.CodeInternal, fmt.Errorf("watch %s: %w", d.root, err))
			}
			d.fail(err)
			return
		}
	}
}

var (
	errQueueFull      = errors.New("events came faster than they were read")
	errKernelOverflow = errors.New("the sandbox's inotify queue overflowed (fs.inotify.max_queued_events)")
)

// fail ends the watch with err: it closes the inotify instance at once (no
// reader waits on it any more) and tells the reader.
func (d *dirWatch) fail(err error) {
	switch {
	case errors.Is(err, errQueueFull):
		d.overflow = errQueueFull
	case errors.Is(err, errKernelOverflow):
		d.overflow = errKernelOverflow
	default:
		d.err = err
	}
	close(d.done)
	_ = d.fsw.Close()
}

// end is what the reader does once done is closed: after an overflow it
// returns the overflow error at once, dropping what is still queued; else it
// hands send what is queued, then returns why the watch ended.
func (d *dirWatch) end(send func(*filesystem.FilesystemEvent) error, names *idNames) error {
	switch d.overflow {
	case errQueueFull:
		// The one that did not fit, and what the reader now drops.
		lost := 1 + len(d.events)
		return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("%s%v; %d or more were lost and the watch stopped", overflowPrefix, d.overflow, lost))
	case errKernelOverflow:
		return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("%s%v; events were lost and the watch stopped", overflowPrefix, d.overflow))
	}
	for {
		select {
		case ev := <-d.events:
			if err := send(d.event(ev, names)); err != nil {
				return err
			}
		default:
			return d.err
		}
	}
}

// handle turns one fsnotify event into queued events and keeps the set of
// watched directories up to date. Its error ends the watch.
func (d *dirWatch) handle(ev fsnotify.Event) error {
	// A watched directory renamed shows twice: its parent's IN_MOVED_FROM
	// and, unless its watch is gone first, its own IN_MOVE_SELF, both as a
	// Rename of its old path. Report it once.
	if ev.Op == fsnotify.Rename && ev.Name == d.movedDir {
		d.movedDir = ""
		return nil
	}
	d.movedDir = ""
	gone := ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename)
	if gone && ev.Name != d.root && d.forget(ev.Name, ev.Has(fsnotify.Rename)) && ev.Has(fsnotify.Rename) {
		d.movedDir = ev.Name
	}
	for _, t := range eventTypes(ev.Op) {
		if !d.enqueue(ev.Name, t) {
			return errQueueFull
		}
	}
	if gone && ev.Name == d.root {
		what := "removed"
		if ev.Has(fsnotify.Rename) {
			what = "moved away"
		}
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("the watched directory %s was %s", d.root, what))
	}
	if d.recursive && ev.Has(fsnotify.Create) && ev.Name != d.root {
		// Symlinks to directories are reported, not followed.
		if fi, err := os.Lstat(ev.Name); err == nil && fi.IsDir() {
			return d.addTree(ev.Name, true)
		}
	}
	return nil
}

// eventTypes lists an fsnotify operation's event types, in envd's order.
func eventTypes(op fsnotify.Op) []filesystem.EventType {
	var ts []filesystem.EventType
	for _, m := range []struct {
		op fsnotify.Op
		t  filesystem.EventType
	}{
		{fsnotify.Create, filesystem.EventType_EVENT_TYPE_CREATE},
		{fsnotify.Rename, filesystem.EventType_EVENT_TYPE_RENAME},
		{fsnotify.Chmod, filesystem.EventType_EVENT_TYPE_CHMOD},
		{fsnotify.Write, filesystem.EventType_EVENT_TYPE_WRITE},
		{fsnotify.Remove, filesystem.EventType_EVENT_TYPE_REMOVE},
	} {
		if op.Has(m.op) {
			ts = append(ts, m.t)
		}
	}
	return ts
}

// enqueue queues an event unless the queue is full.
func (d *dirWatch) enqueue(path string, t filesystem.EventType) bool {
	select {
	case d.events <- watchEvent{path: path, typ: t}:
		return true
	default:
		return false
	}
}

// addTree watches dir and, when the watch is recursive, the directories
// under it. With created set, dir is new: what is in it is reported as
// created, since it may have been made before dir's watch existed.
func (d *dirWatch) addTree(dir string, created bool) error {
	if _, ok := d.dirs[dir]; ok {
		return nil // watched, and read when it was
	}
	if len(d.dirs) >= maxWatchDirs {
		return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("watch: more than %d directories under %s; watch a narrower one", maxWatchDirs, d.root))
	}
	if err := d.fsw.Add(dir); err != nil {
		switch {
		case dir != d.root && (errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR)):
			return nil // gone already; its parent reports that
		case errors.Is(err, unix.ENOSPC):
			return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("watch %s: the sandbox's inotify watches are used up (fs.inotify.max_user_watches); watch a narrower directory or raise the limit", d.root))
		}
		return fsError(&fs.PathError{Op: "watch", Path: dir, Err: err})
	}
	d.dirs[dir] = struct{}{}
	if !d.recursive {
		return nil
	}
	des, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, unix.ENOTDIR) {
		return fsError(err)
	}
	for _, de := range des { // what was read, even when the rest failed
		p := filepath.Join(dir, de.Name())
		if created && !d.enqueue(p, filesystem.EventType_EVENT_TYPE_CREATE) {
			return errQueueFull
		}
		if de.IsDir() { // not a symlink to one
			if err := d.addTree(p, created); err != nil {
				return err
			}
		}
	}
	return nil
}

// forget stops watching dir, if it is watched, because it was removed or
// moved; when moved, the directories under it too. A directory moved within
// the tree is watched again under its new name when its Create comes.
func (d *dirWatch) forget(dir string, moved bool) bool {
	if _, ok := d.dirs[dir]; !ok {
		return false
	}
	delete(d.dirs, dir)
	// inotify drops a removed directory's watch once nothing holds the
	// directory; a moved one's must go now, or its events would carry its
	// old path.
	_ = d.fsw.Remove(dir)
	if !moved {
		return true // removed, so empty: what was under it went before
	}
	prefix := dir + string(filepath.Separator)
	for p := range d.dirs {
		if strings.HasPrefix(p, prefix) {
			delete(d.dirs, p)
			_ = d.fsw.Remove(p)
		}
	}
	return true
}

// event makes the FilesystemEvent for ev: its name relative to the root and,
// when names is set, the entry of what ev.path is now, for the types whose
// path names the thing that changed (as envd: not for a remove or rename).
func (d *dirWatch) event(ev watchEvent, names *idNames) *filesystem.FilesystemEvent {
	name, err := filepath.Rel(d.root, ev.path)
	if err != nil {
		name = ev.path
	}
	out := &filesystem.FilesystemEvent{Name: name, Type: ev.typ}
	if names == nil {
		return out
	}
	switch ev.typ {
	case filesystem.EventType_EVENT_TYPE_CREATE, filesystem.EventType_EVENT_TYPE_WRITE, filesystem.EventType_EVENT_TYPE_CHMOD:
		if fi, err := os.Lstat(ev.path); err == nil {
			out.Entry = entryInfo(ev.path, fi, *names)
		}
	}
	return out
}

// watcher is a watch that its client polls (CreateWatcher), kept until
// RemoveWatcher or until it has not been polled for watcherIdle. It holds
// its place among the maxWatches until then, even once its watch has ended.
type watcher struct {
	d     *dirWatch
	names *idNames
	idle  *time.Timer // removes the watcher; reset by every poll
	mu    sync.Mutex  // one poll at a time
}

func (f *filesystemService) CreateWatcher(_ context.Context, req *connect.Request[filesystem.CreateWatcherRequest]) (*connect.Response[filesystem.CreateWatcherResponse], error) {
	d, err := f.startWatch(req.Header(), req.Msg.GetPath(), req.Msg.GetRecursive())
	if err != nil {
		return nil, err
	}
	w := &watcher{d: d}
	if req.Msg.GetIncludeEntry() {
		n := f.srv.loadIDNames()
		w.names = &n
	}
	id := "w" + rand.Text()
	f.watch.mu.Lock()
	if f.watch.watchers == nil {
		f.watch.watchers = map[string]*watcher{}
	}
	f.watch.watchers[id] = w
	w.idle = time.AfterFunc(watcherIdle, func() { f.removeWatcher(id) })
	f.watch.mu.Unlock()
	return connect.NewResponse(&filesystem.CreateWatcherResponse{WatcherId: id}), nil
}

// GetWatcherEvents returns the events since the last call. Once the watch
// has ended, it returns what was still queued, then, on every later call,
// why the watch ended (an overflow at once, dropping what was queued).
func (f *filesystemService) GetWatcherEvents(_ context.Context, req *connect.Request[filesystem.GetWatcherEventsRequest]) (*connect.Response[filesystem.GetWatcherEventsResponse], error) {
	w, err := f.watcher(req.Msg.GetWatcherId())
	if err != nil {
		return nil, err
	}
	w.idle.Reset(watcherIdle)
	w.mu.Lock()
	defer w.mu.Unlock()
	var evs []*filesystem.FilesystemEvent
	select {
	case <-w.d.done:
		err := w.d.end(func(ev *filesystem.FilesystemEvent) error { evs = append(evs, ev); return nil }, w.names)
		if len(evs) == 0 {
			return nil, err
		}
	default:
		// At most what the queue holds: events that come meanwhile wait
		// for the next call.
	drain:
		for range watchQueueLen {
			select {
			case ev := <-w.d.events:
				evs = append(evs, w.d.event(ev, w.names))
			default:
				break drain
			}
		}
	}
	return connect.NewResponse(&filesystem.GetWatcherEventsResponse{Events: evs}), nil
}

func (f *filesystemService) RemoveWatcher(_ context.Context, req *connect.Request[filesystem.RemoveWatcherRequest]) (*connect.Response[filesystem.RemoveWatcherResponse], error) {
	if !f.removeWatcher(req.Msg.GetWatcherId()) {
		return nil, errNoWatcher(req.Msg.GetWatcherId())
	}
	return connect.NewResponse(&filesystem.RemoveWatcherResponse{}), nil
}

func (f *filesystemService) watcher(id string) (*watcher, error) {
	f.watch.mu.Lock()
	defer f.watch.mu.Unlock()
	w, ok := f.watch.watchers[id]
	if !ok {
		return nil, errNoWatcher(id)
	}
	return w, nil
}

func errNoWatcher(id string) error {
	return connect.NewError(connect.CodeNotFound, fmt.Errorf("no watcher %q: it was removed, or not polled for %v", id, watcherIdle))
}

// removeWatcher stops and forgets watcher id, if there is one.
func (f *filesystemService) removeWatcher(id string) bool {
	f.watch.mu.Lock()
	w, ok := f.watch.watchers[id]
	delete(f.watch.watchers, id)
	f.watch.mu.Unlock()
	if !ok {
		return false
	}
	w.idle.Stop()
	w.d.stop()
	return true
}

// closeWatchers removes every polled watcher, for the agent's shutdown.
// (Watch streams end with their requests.)
func (f *filesystemService) closeWatchers() {
	f.watch.mu.Lock()
	ids := make([]string, 0, len(f.watch.watchers))
	for id := range f.watch.watchers {
		ids = append(ids, id)
	}
	f.watch.mu.Unlock()
	for _, id := range ids {
		f.removeWatcher(id)
	}
}
