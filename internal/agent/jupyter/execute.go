package jupyter

import (
	"context"
	"encoding/json"
	"fmt"
)

// EventKind says what an Event carries.
type EventKind string

const (
	EventStdout  EventKind = "stdout"  // Text written to stdout
	EventStderr  EventKind = "stderr"  // Text written to stderr
	EventResult  EventKind = "result"  // execute_result: the value of the code's last expression
	EventDisplay EventKind = "display" // display_data, or update_display_data when Update is set
	EventError   EventKind = "error"   // an exception, in Error
	EventClear   EventKind = "clear"   // clear_output: clear now, or at the next output when Wait is set
)

// Event is one piece of output of the code Execute runs, in the order the
// kernel published it. Only the fields of its Kind are set.
type Event struct {
	Kind EventKind

	Text string // stdout, stderr

	Data           map[string]any // result, display: the MIME bundle, by MIME type
	Metadata       map[string]any // result, display
	IsMain         bool           // result: true, as it is the cell's own value
	ExecutionCount int            // result
	DisplayID      string         // display: the display_id the kernel gave, if any
	Update         bool           // display: replaces the earlier display with DisplayID

	Error *KernelError // error

	Wait bool // clear
}

// Reply is the kernel's answer to an execute_request.
type Reply struct {
	Status         string // "ok", "error" or "aborted" (skipped after an earlier error)
	ExecutionCount int
	Error          *KernelError // when Status is "error"
}

// KernelError is an exception the executed code raised, as the kernel
// reports it. The Traceback lines may hold ANSI colour codes.
type KernelError struct {
	Name      string   `json:"ename"`
	Value     string   `json:"evalue"`
	Traceback []string `json:"traceback"`
}

func (e *KernelError) Error() string { return e.Name + ": " + e.Value }

// executeRequest is the content of an execute_request.
//
// stop_on_error is false, though a notebook sends true: it asks the kernel,
// after an error, to abort the execute_requests queued behind the failed
// one. Execute never queues one behind another, so there is nothing to
// abort, but ipykernel sends its reply before it stops aborting, so an
// Execute that follows a failed one at once would come back "aborted"
// without running (ipython/ipykernel#609; seen here with 6.17).
type executeRequest struct {
	Code            string         `json:"code"`
	Silent          bool           `json:"silent"`
	StoreHistory    bool           `json:"store_history"`
	UserExpressions map[string]any `json:"user_expressions"`
	AllowStdin      bool           `json:"allow_stdin"`
	StopOnError     bool           `json:"stop_on_error"`
}

// Execute runs code in the kernel and calls fn (which may be nil) with
// each piece of its output, from the goroutine that called Execute. It
// returns when the kernel has replied and has published status idle for
// this request, which is when all the output is in.
//
// The code is stored in the kernel's history and counted, and cannot read
// stdin. The kernel saying the code raised is not an error of Execute: see
// Reply.Status.
//
// Execute returns early with an error when ctx ends, when fn returns an
// error, or when the client fails (the kernel died: an error wrapping
// ErrKernelGone). None of these stops the code in the kernel: Interrupt or
// SIGINT does, and the output it goes on making is ignored.
//
// One Execute runs at a time on a client; another waits for its turn.
func (c *Client) Execute(ctx context.Context, code string, fn func(Event) error) (Reply, error) {
	release, err := c.take(ctx)
	if err != nil {
		return Reply{}, fmt.Errorf("execute: %w", err)
	}
	defer release()
	w := c.newWaiter()
	defer c.unregister(w)
	req := executeRequest{Code: code, StoreHistory: true, UserExpressions: map[string]any{}}
	if err := c.request(ctx, c.shell, w, "execute_request", req); err != nil {
		return Reply{}, fmt.Errorf("execute: %w", err)
	}

	var reply *Reply
	idle := false
	for reply == nil || !idle {
		m, err := c.next(ctx, w)
		if err != nil {
			return Reply{}, fmt.Errorf("execute: %w", err)
		}
		switch {
		case m.channel == "shell" && m.Header.MsgType == "execute_reply":
			if reply, err = parseReply(m.Content); err != nil {
				return Reply{}, fmt.Errorf("execute: %w", err)
			}
		case m.channel == "iopub" && m.Header.MsgType == "status":
			idle = idle || isIdle(m.Content)
		case m.channel == "iopub":
			ev, ok := parseEvent(m)
			if !ok || fn == nil {
				continue
			}
			if err := fn(ev); err != nil {
				return Reply{}, err
			}
		}
	}
	return *reply, c.linger(ctx, w, fn)
}

// linger reads what the kernel still sends for w's request until it has
// been quiet for c.Linger (see Linger).
func (c *Client) linger(ctx context.Context, w *waiter, fn func(Event) error) error {
	for c.Linger > 0 {
		quiet, cancel := context.WithTimeout(ctx, c.Linger)
		m, err := c.next(quiet, w)
		cancel()
		if err != nil {
			return ctx.Err() // quiet, or the kernel gone after its reply: the request is done
		}
		if ev, ok := parseEvent(m); ok && m.channel == "iopub" && fn != nil {
			if err := fn(ev); err != nil {
				return err
			}
		}
	}
	return nil
}

func parseReply(content json.RawMessage) (*Reply, error) {
	var r struct {
		Status         string `json:"status"`
		ExecutionCount int    `json:"execution_count"`
		KernelError
	}
	if err := json.Unmarshal(content, &r); err != nil {
		return nil, fmt.Errorf("malformed execute_reply: %w", err)
	}
	reply := &Reply{Status: r.Status, ExecutionCount: r.ExecutionCount}
	if r.Status == "error" {
		reply.Error = &r.KernelError
	}
	return reply, nil
}

func isIdle(content json.RawMessage) bool {
	var s struct {
		ExecutionState string `json:"execution_state"`
	}
	return json.Unmarshal(content, &s) == nil && s.ExecutionState == "idle"
}

// parseEvent turns an iopub message into an Event. ok is false for
// messages that are not output (execute_input, comm messages, …) and for
// output whose content does not parse, which is skipped.
func parseEvent(m *message) (ev Event, ok bool) {
	var c struct {
		Name           string         `json:"name"`
		Text           string         `json:"text"`
		Data           map[string]any `json:"data"`
		Metadata       map[string]any `json:"metadata"`
		ExecutionCount int            `json:"execution_count"`
		Transient      struct {
			DisplayID string `json:"display_id"`
		} `json:"transient"`
		Wait bool `json:"wait"`
		KernelError
	}
	if err := json.Unmarshal(m.Content, &c); err != nil {
		return Event{}, false
	}
	switch t := m.Header.MsgType; t {
	case "stream":
		switch c.Name {
		case "stdout":
			return Event{Kind: EventStdout, Text: c.Text}, true
		case "stderr":
			return Event{Kind: EventStderr, Text: c.Text}, true
		}
	case "execute_result":
		return Event{Kind: EventResult, Data: c.Data, Metadata: c.Metadata, IsMain: true, ExecutionCount: c.ExecutionCount}, true
	case "display_data", "update_display_data":
		return Event{Kind: EventDisplay, Data: c.Data, Metadata: c.Metadata, DisplayID: c.Transient.DisplayID, Update: t == "update_display_data"}, true
	case "error":
		return Event{Kind: EventError, Error: &c.KernelError}, true
	case "clear_output":
		return Event{Kind: EventClear, Wait: c.Wait}, true
	}
	return Event{}, false
}
