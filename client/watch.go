package client

import (
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
)

// Watch operations (FileEvent.Op).
const (
	FileCreate = "create"
	FileWrite  = "write"
	FileRemove = "remove"
	FileRename = "rename" // the old name; the new one comes as a create
	FileChmod  = "chmod"
	// FileOverflow: changes came faster than they were read and some
	// were lost (re-list the directory); the watch goes on.
	FileOverflow = "overflow"
	// FileWatching: the watch is made; changes from now on are told.
	FileWatching = "watching"
)

// FileEvent is a change under a watched directory.
type FileEvent struct {
	// Path is the changed file's absolute path in the sandbox (the
	// watched directory's, for FileWatching and FileOverflow).
	Path string `json:"path"`
	Op   string `json:"op"`
}

// WatchFiles calls fn with each change under directory path of sandbox id
// (and its subdirectories, with recursive): first FileWatching once the
// watch is made, then each change, until ctx ends (nil) or fn fails (its
// error). A directory that is not there is an error at once.
func (c *Client) WatchFiles(ctx context.Context, id, path string, recursive bool, fn func(FileEvent) error, opts ...FileOption) error {
	if err := checkID(id); err != nil {
		return err
	}
	q := fileQuery(path, applyFileOptions(opts))
	if recursive {
		q.Set("recursive", "true")
	}
	resp, err := c.do(ctx, request{method: http.MethodGet, path: sandboxPath(id) + "/files/watch", query: q, accept: "text/event-stream"})
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		return fmt.Errorf("watch: unexpected response content type %q", mt)
	}
	sse := newSSEReader(resp.Body)
	for {
		ev, err := sse.nextBefore(ctx, "watch stream ended")
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if ev.name == "error" {
			return decodeErrorEvent(ev.data)
		}
		var fe FileEvent
		if err := json.Unmarshal(ev.data, &fe); err != nil {
			return fmt.Errorf("watch: %w", err)
		}
		if err := fn(fe); err != nil {
			return err
		}
	}
}
