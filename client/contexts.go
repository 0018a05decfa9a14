package client

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
)

// Code contexts: a kernel in the sandbox (Jupyter's ipykernel for Python,
// Deno's for JavaScript and TypeScript, a bash process for bash) where
// variables, imports and the working directory persist from one call to
// the next, and whose results are MIME bundles (text, HTML, PNG charts).

// CodeContext is a code context of a sandbox.
type CodeContext struct {
	ID       string `json:"id"`
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
	User     string `json:"user"`
}

// CreateContextRequest is a code context to create.
type CreateContextRequest struct {
	// Language is python, javascript, typescript or bash (also py, js,
	// ts, deno, sh).
	Language string `json:"language"`
	// Cwd defaults to /home/user/workspace.
	Cwd string            `json:"cwd,omitempty"`
	Env map[string]string `json:"env,omitempty"`
	// User is the Linux user the kernel runs as (default "user").
	User string `json:"user,omitempty"`
}

// CodeResult is one output of a kernel: the cell's value (IsMainResult)
// or something it displayed (a chart, a table).
type CodeResult struct {
	IsMainResult bool `json:"is_main_result"`
	// Data is the MIME bundle: text/plain, text/html, text/markdown,
	// image/png and image/jpeg (base64), image/svg+xml, application/json
	// (a JSON value), text/latex…
	Data     map[string]json.RawMessage `json:"data"`
	Metadata json.RawMessage            `json:"metadata,omitempty"`
}

// Text returns the bundle's content of a text type (text/plain,
// text/html…), or "" when it has none.
func (r CodeResult) Text(mimeType string) string {
	var s string
	if json.Unmarshal(r.Data[mimeType], &s) != nil {
		return ""
	}
	return s
}

// Image returns the decoded bytes of a base64 type (image/png,
// image/jpeg), or nil when the bundle has none.
func (r CodeResult) Image(mimeType string) ([]byte, error) {
	s := r.Text(mimeType)
	if s == "" {
		return nil, nil
	}
	return base64.StdEncoding.DecodeString(s)
}

// CodeError is the failure of code: the exception's name, its value and
// the traceback. bash's failures are named ExitStatus.
type CodeError struct {
	Name      string   `json:"name"`
	Value     string   `json:"value"`
	Traceback []string `json:"traceback,omitempty"`
}

// CodeFile is a file the code wrote under its context's working
// directory, with a URL to download it (valid for an hour, without the
// API key).
type CodeFile struct {
	Path        string `json:"path"`
	DownloadURL string `json:"download_url,omitempty"`
}

// CodeEnd is how a call in a context ended: the last event of its stream.
type CodeEnd struct {
	ExecutionCount int  `json:"execution_count"`
	TimedOut       bool `json:"timed_out"`
	// Restarted says the kernel died or did not stop at the timeout, and
	// a new one took its place: the context's state is gone.
	Restarted      bool       `json:"restarted"`
	Files          []CodeFile `json:"files,omitempty"`
	FilesTruncated bool       `json:"files_truncated,omitempty"`
	DurationMS     int64      `json:"duration_ms"`
}

// CodeExecution is what a call in a context gave, whole.
type CodeExecution struct {
	Results []CodeResult `json:"results"`
	Stdout  string       `json:"stdout"`
	Stderr  string       `json:"stderr"`
	Error   *CodeError   `json:"error,omitempty"`
	// Truncated: stdout or stderr passed 1 MiB and was cut there.
	Truncated bool `json:"truncated,omitempty"`
	CodeEnd
}

// MainResult returns the cell's value, or nil when it had none.
func (e *CodeExecution) MainResult() *CodeResult {
	for i := range e.Results {
		if e.Results[i].IsMainResult {
			return &e.Results[i]
		}
	}
	return nil
}

// CodeEvent is one event of a call in a context: exactly one field is
// set.
type CodeEvent struct {
	Stdout, Stderr string
	Result         *CodeResult
	Error          *CodeError
}

// CreateContext starts a code context in sandbox id. A language whose
// kernel the sandbox lacks is IsFailedPrecondition, naming the template
// that has it.
func (c *Client) CreateContext(ctx context.Context, id string, req CreateContextRequest) (*CodeContext, error) {
	var out CodeContext
	if err := c.contextCall(ctx, id, http.MethodPost, "", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListContexts lists sandbox id's code contexts.
func (c *Client) ListContexts(ctx context.Context, id string) ([]CodeContext, error) {
	var out struct {
		Contexts []CodeContext `json:"contexts"`
	}
	if err := c.contextCall(ctx, id, http.MethodGet, "", nil, &out); err != nil {
		return nil, err
	}
	return out.Contexts, nil
}

// RestartContext gives a context a new kernel: its state is gone.
func (c *Client) RestartContext(ctx context.Context, id, contextID string) (*CodeContext, error) {
	var out CodeContext
	if err := c.contextCall(ctx, id, http.MethodPost, "/"+url.PathEscape(contextID)+"/restart", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteContext ends a context and its kernel.
func (c *Client) DeleteContext(ctx context.Context, id, contextID string) error {
	return c.contextCall(ctx, id, http.MethodDelete, "/"+url.PathEscape(contextID), nil, nil)
}

func (c *Client) contextCall(ctx context.Context, id, method, rest string, body, out any) error {
	if err := checkID(id); err != nil {
		return err
	}
	return c.call(ctx, request{method: method, path: sandboxPath(id, "contexts") + rest, json: body}, out)
}

// RunInContext runs code in a context (req.ContextID) of sandbox id and
// waits for it to end. The code's own failure is in the result's Error,
// not an error.
func (c *Client) RunInContext(ctx context.Context, id string, req CodeRequest) (*CodeExecution, error) {
	if req.ContextID == "" {
		return nil, fmt.Errorf("code: a context id is required")
	}
	var out CodeExecution
	if err := checkID(id); err != nil {
		return nil, err
	}
	if err := c.call(ctx, request{method: http.MethodPost, path: sandboxPath(id, "code"), json: req}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RunInContextStream runs code in a context of sandbox id, handing fn its
// output and results as they come, and returns how it ended.
func (c *Client) RunInContextStream(ctx context.Context, id string, req CodeRequest, fn func(CodeEvent) error) (*CodeEnd, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	if req.ContextID == "" {
		return nil, fmt.Errorf("code: a context id is required")
	}
	resp, err := c.do(ctx, request{method: http.MethodPost, path: sandboxPath(id, "code"), json: req, accept: "text/event-stream"})
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		return nil, fmt.Errorf("code: unexpected response content type %q", mt)
	}
	sse := newSSEReader(resp.Body)
	for {
		ev, err := sse.nextBefore(ctx, "code stream ended before the code did")
		if err != nil {
			return nil, err
		}
		var out CodeEvent
		switch ev.name {
		case Stdout, Stderr:
			chunk, err := outputOf(ev)
			if err != nil {
				return nil, fmt.Errorf("code: %w", err)
			}
			if ev.name == Stdout {
				out.Stdout = string(chunk)
			} else {
				out.Stderr = string(chunk)
			}
		case "result":
			out.Result = new(CodeResult)
			err = json.Unmarshal(ev.data, out.Result)
		case "error":
			var body struct {
				Error *json.RawMessage `json:"error"`
			}
			// The code's error has a name; the daemon's failure mid-stream
			// is {"error": {...}}.
			if json.Unmarshal(ev.data, &body) == nil && body.Error != nil {
				return nil, decodeErrorEvent(ev.data)
			}
			out.Error = new(CodeError)
			err = json.Unmarshal(ev.data, out.Error)
		case "end":
			var end CodeEnd
			if err := json.Unmarshal(ev.data, &end); err != nil {
				return nil, fmt.Errorf("code: decode end event: %w", err)
			}
			return &end, nil
		default:
			continue // reserved for later use
		}
		if err != nil {
			return nil, fmt.Errorf("code: decode %s event: %w", ev.name, err)
		}
		if err := fn(out); err != nil {
			return nil, err
		}
	}
}
