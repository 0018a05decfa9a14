package client

import (
	"context"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
)

// FileOption changes how a file operation runs.
type FileOption func(*fileOptions)

type fileOptions struct {
	user string
}

// AsUser runs a file operation as user: UserDefault ("user") or UserRoot.
func AsUser(user string) FileOption {
	return func(o *fileOptions) { o.user = user }
}

func applyFileOptions(opts []FileOption) fileOptions {
	var o fileOptions
	for _, f := range opts {
		f(&o)
	}
	return o
}

// fileQuery is the query of the path-addressed file routes.
func fileQuery(path string, o fileOptions) url.Values {
	q := url.Values{"path": {path}}
	if o.user != "" {
		q.Set("user", o.user)
	}
	return q
}

// ReadFile opens a file in sandbox id for reading. The caller must close the
// returned reader; the content streams from the daemon as it is read, and ctx
// bounds the whole read.
func (c *Client) ReadFile(ctx context.Context, id, path string, opts ...FileOption) (io.ReadCloser, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	resp, err := c.do(ctx, request{
		method: http.MethodGet,
		path:   sandboxPath(id, "files"),
		query:  fileQuery(path, applyFileOptions(opts)),
		accept: "application/octet-stream",
	})
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// WriteFile writes everything read from r to a file in sandbox id, replacing
// it if it exists and creating missing parent directories. The content is
// streamed, never held whole in memory.
func (c *Client) WriteFile(ctx context.Context, id, path string, r io.Reader, opts ...FileOption) (*FileEntry, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	var fe FileEntry
	err := c.call(ctx, request{
		method:      http.MethodPut,
		path:        sandboxPath(id, "files"),
		query:       fileQuery(path, applyFileOptions(opts)),
		body:        r,
		contentType: "application/octet-stream",
	}, &fe)
	if err != nil {
		return nil, err
	}
	return &fe, nil
}

// Upload is a file to send with (*Client).Upload.
type Upload struct {
	Name    string // a file name, without directories
	Content io.Reader
}

// UploadDir is where uploads land in a sandbox.
const UploadDir = "/home/user/workspace/user-uploads"

// Upload sends files into sandbox id's UploadDir, each under its own name,
// in one multipart/form-data request streamed as the contents are read.
// If one fails, none is left.
func (c *Client) Upload(ctx context.Context, id string, files []Upload, opts ...FileOption) ([]FileEntry, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		for _, f := range files {
			part, err := mw.CreateFormFile("file", f.Name)
			if err == nil {
				_, err = io.Copy(part, f.Content)
			}
			if err != nil {
				pw.CloseWithError(err)
				return
			}
		}
		pw.CloseWithError(mw.Close())
	}()
	defer func() { _ = pr.Close() }() // ends the writer if the request ends early
	q := url.Values{}
	if o := applyFileOptions(opts); o.user != "" {
		q.Set("user", o.user)
	}
	var out struct {
		Files []FileEntry `json:"files"`
	}
	err := c.call(ctx, request{
		method:      http.MethodPost,
		path:        sandboxPath(id, "files", "upload"),
		query:       q,
		body:        pr,
		contentType: mw.FormDataContentType(),
	}, &out)
	if err != nil {
		return nil, err
	}
	return out.Files, nil
}

// DeleteFile removes a file, or a directory with everything in it.
func (c *Client) DeleteFile(ctx context.Context, id, path string, opts ...FileOption) error {
	if err := checkID(id); err != nil {
		return err
	}
	return c.call(ctx, request{
		method: http.MethodDelete,
		path:   sandboxPath(id, "files"),
		query:  fileQuery(path, applyFileOptions(opts)),
	}, nil)
}

// StatFile describes a file, directory or symlink (not following it).
func (c *Client) StatFile(ctx context.Context, id, path string, opts ...FileOption) (*FileEntry, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	var fe FileEntry
	err := c.call(ctx, request{
		method: http.MethodGet,
		path:   sandboxPath(id, "files", "stat"),
		query:  fileQuery(path, applyFileOptions(opts)),
	}, &fe)
	if err != nil {
		return nil, err
	}
	return &fe, nil
}

// ListFiles lists the entries under a directory down to depth levels (1: its
// own entries; 0 or less: the daemon's default, 1).
func (c *Client) ListFiles(ctx context.Context, id, path string, depth int, opts ...FileOption) ([]FileEntry, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	q := fileQuery(path, applyFileOptions(opts))
	if depth > 0 {
		q.Set("depth", strconv.Itoa(depth))
	}
	var out struct {
		Entries []FileEntry `json:"entries"`
	}
	err := c.call(ctx, request{method: http.MethodGet, path: sandboxPath(id, "files", "list"), query: q}, &out)
	if err != nil {
		return nil, err
	}
	return out.Entries, nil
}

// MakeDir creates a directory and any missing parents. It fails with
// already_exists when something is at path already.
func (c *Client) MakeDir(ctx context.Context, id, path string, opts ...FileOption) (*FileEntry, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	o := applyFileOptions(opts)
	body := struct {
		Path string `json:"path"`
		User string `json:"user,omitempty"`
	}{path, o.user}
	var fe FileEntry
	err := c.call(ctx, request{method: http.MethodPost, path: sandboxPath(id, "files", "mkdir"), json: body}, &fe)
	if err != nil {
		return nil, err
	}
	return &fe, nil
}

// MoveFile moves or renames a file or directory, like rename(2).
func (c *Client) MoveFile(ctx context.Context, id, source, destination string, opts ...FileOption) (*FileEntry, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	o := applyFileOptions(opts)
	body := struct {
		Source      string `json:"source"`
		Destination string `json:"destination"`
		User        string `json:"user,omitempty"`
	}{source, destination, o.user}
	var fe FileEntry
	err := c.call(ctx, request{method: http.MethodPost, path: sandboxPath(id, "files", "move"), json: body}, &fe)
	if err != nil {
		return nil, err
	}
	return &fe, nil
}
