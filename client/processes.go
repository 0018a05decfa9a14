package client

import (
	"context"
	"fmt"
	"mime"
	"net/http"
	"net/url"
)

// StartProcess starts a background process in sandbox id, waking it, and
// returns it running. It keeps the sandbox awake while it runs, and a
// sandbox suspended while it ran starts it again on resume.
func (c *Client) StartProcess(ctx context.Context, id string, req StartProcessRequest) (*Process, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	var p Process
	if err := c.call(ctx, request{method: http.MethodPost, path: sandboxPath(id, "processes"), json: req}, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// ListProcesses lists a sandbox's background processes without waking it.
func (c *Client) ListProcesses(ctx context.Context, id string) ([]Process, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	var out struct {
		Processes []Process `json:"processes"`
	}
	if err := c.call(ctx, request{method: http.MethodGet, path: sandboxPath(id, "processes")}, &out); err != nil {
		return nil, err
	}
	return out.Processes, nil
}

// ProcessLogs calls fn with a background process's latest output (up to
// 1 MiB) and, with follow, what it writes next, until it exits or ctx ends.
func (c *Client) ProcessLogs(ctx context.Context, id, name string, follow bool, fn func(ExecEvent) error) error {
	if err := checkID(id); err != nil {
		return err
	}
	path := processPath(id, name) + "/logs"
	if follow {
		path += "?follow=true"
	}
	resp, err := c.do(ctx, request{method: http.MethodGet, path: path, accept: "text/event-stream"})
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		return fmt.Errorf("logs: unexpected response content type %q", mt)
	}
	sse := newSSEReader(resp.Body)
	for {
		ev, err := sse.nextBefore(ctx, "logs stream ended before its end event")
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		switch ev.name {
		case Stdout, Stderr:
			chunk, err := outputOf(ev)
			if err != nil {
				return fmt.Errorf("logs: %w", err)
			}
			if len(chunk) > 0 {
				if err := fn(ExecEvent{Stream: ev.name, Data: chunk}); err != nil {
					return err
				}
			}
		case "end":
			return nil
		case "error":
			return decodeErrorEvent(ev.data)
		}
	}
}

// SignalProcess sends a signal (HUP, INT, QUIT, KILL, USR1, USR2, TERM) to
// a background process; KILL kills its whole process tree.
func (c *Client) SignalProcess(ctx context.Context, id, name, signal string) error {
	if err := checkID(id); err != nil {
		return err
	}
	return c.call(ctx, request{method: http.MethodPost, path: processPath(id, name) + "/signal", json: SignalRequest{Signal: signal}}, nil)
}

// SendProcessInput writes data to the stdin of a background process
// started with Stdin, then, with close, ends it (the process reads EOF).
func (c *Client) SendProcessInput(ctx context.Context, id, name string, data []byte, close bool) error {
	if err := checkID(id); err != nil {
		return err
	}
	return c.call(ctx, request{method: http.MethodPost, path: processPath(id, name) + "/stdin", json: ProcessInputRequest{DataBase64: data, Close: close}}, nil)
}

// RestartProcess stops a background process (TERM, then KILL after 5 s) and
// starts it again with the same command and env.
func (c *Client) RestartProcess(ctx context.Context, id, name string) (*Process, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	var p Process
	if err := c.call(ctx, request{method: http.MethodPost, path: processPath(id, name) + "/restart"}, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// DeleteProcess kills a background process's tree and forgets it.
func (c *Client) DeleteProcess(ctx context.Context, id, name string) error {
	if err := checkID(id); err != nil {
		return err
	}
	return c.call(ctx, request{method: http.MethodDelete, path: processPath(id, name)}, nil)
}

// Activity says why sandbox id counts as busy or idle and when its idle
// timer acts. Asking is not activity, and does not wake it.
func (c *Client) Activity(ctx context.Context, id string) (*Activity, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	var a Activity
	if err := c.call(ctx, request{method: http.MethodGet, path: sandboxPath(id, "activity")}, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

func processPath(id, name string) string {
	return sandboxPath(id, "processes") + "/" + url.PathEscape(name)
}
