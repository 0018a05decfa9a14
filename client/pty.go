package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/coder/websocket"
)

// PtyRequest opens a terminal session in a sandbox (GET
// /v1/sandboxes/{id}/pty, a WebSocket).
type PtyRequest struct {
	// Command is a command line the user's login shell runs (-c); ""
	// runs the login shell itself, as a login shell.
	Command string
	Cwd     string // default: the workspace
	Env     map[string]string
	User    string // default: the sandbox user
	// NoTTY gives the command pipes instead of a terminal: its stdout
	// and stderr come apart, and CloseInput ends its stdin.
	NoTTY bool
	// Cols and Rows are the terminal's size; 0 is 80x24.
	Cols, Rows int
}

// Types of the JSON text frames of a session.
const (
	PtyStarted = "started" // daemon → client, first: the command runs
	PtyExited  = "exit"    // daemon → client, last: how it ended
	PtyError   = "error"   // daemon → client: a control message failed, or the session did
	PtyResize  = "resize"  // client → daemon
	PtySignal  = "signal"  // client → daemon
	PtyEOF     = "eof"     // client → daemon
)

// Stream bytes that start each binary frame of a session without a
// terminal.
const (
	PtyStdout byte = 1
	PtyStderr byte = 2
)

// PtyControl is a text frame a client sends: resize (Cols, Rows), signal
// (Signal: INT, TERM, HUP, QUIT, USR1, USR2 go to the command; KILL kills
// its whole process tree) or eof (the end of its input).
type PtyControl struct {
	Type   string `json:"type"`
	Cols   int    `json:"cols,omitempty"`
	Rows   int    `json:"rows,omitempty"`
	Signal string `json:"signal,omitempty"`
}

// PtyStart is the first text frame of a session: the command runs, as
// process Pid of the sandbox.
type PtyStart struct {
	Type string `json:"type"`
	Pid  uint32 `json:"pid"`
}

// PtyExit is the last text frame of a session: how its command ended, as
// an exec's exit event says, and the name of the signal that killed it,
// if one did ("SIGKILL").
type PtyExit struct {
	Type string `json:"type"`
	ExecExit
	Signal string `json:"signal,omitempty"`
}

// PtyOutput is a chunk of a session's output: Stream is Stdout or Stderr
// without a terminal, "" with one (its output is one stream).
type PtyOutput struct {
	Stream string
	Data   []byte
}

// PtySession is an open terminal session. Read (or Copy, or Wait) is
// called by one goroutine, all along: it also answers the daemon's pings,
// and a session that leaves them unanswered for about 45 s is dropped.
// Write, Resize, Signal, CloseInput and Close are called by any goroutine,
// also beside it. A context given to one of its calls that ends closes
// the session, which kills the command.
type PtySession struct {
	// Pid is the command's main process in the sandbox.
	Pid  uint32
	conn *websocket.Conn
	exit *PtyExit
	// failure is the daemon's last error frame: why the session ended,
	// when it did without an exit; else a control message it refused.
	failure *Error
	err     error // how the session ended, when not with an exit
	pipes   bool  // no terminal: each output frame starts with its stream
}

// maxPtyFrame is the most input one frame carries: the daemon takes up to
// 64 KiB.
const maxPtyFrame = 32 << 10

// Pty opens a terminal session in sandbox id and returns once its command
// runs. The session lasts until the command ends or Close: the daemon
// kills the command's process tree when the connection drops. Errors
// before the session opens are *Error: an unknown sandbox is not found, a
// bad request invalid_argument.
func (c *Client) Pty(ctx context.Context, id string, req PtyRequest) (*PtySession, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	u := *c.base
	u.RawPath = sandboxPath(id, "pty")
	u.Path, _ = url.PathUnescape(u.RawPath)
	u.RawQuery = req.query().Encode()
	conn, resp, err := websocket.Dial(ctx, u.String(), &websocket.DialOptions{HTTPClient: c.upgradeClient(), HTTPHeader: c.headers()})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			defer func() { _ = resp.Body.Close() }()
			return nil, decodeError(resp)
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, fmt.Errorf("open a terminal in sandbox %s: %w", id, err)
	}
	conn.SetReadLimit(1 << 20)
	s := &PtySession{conn: conn, pipes: req.NoTTY}
	if err := s.readStart(ctx); err != nil {
		_ = conn.CloseNow()
		return nil, err
	}
	return s, nil
}

func (r PtyRequest) query() url.Values {
	q := url.Values{}
	if r.Command != "" {
		q.Set("cmd", r.Command)
	}
	if r.Cwd != "" {
		q.Set("cwd", r.Cwd)
	}
	if r.User != "" {
		q.Set("user", r.User)
	}
	for k, v := range r.Env {
		q.Add("env", k+"="+v)
	}
	if r.NoTTY {
		q.Set("tty", "false")
	}
	if r.Cols > 0 {
		q.Set("cols", strconv.Itoa(r.Cols))
	}
	if r.Rows > 0 {
		q.Set("rows", strconv.Itoa(r.Rows))
	}
	return q
}

// upgradeClient is the client's own HTTP client for an upgrade: over
// https with its transport held to HTTP/1.1, since a WebSocket needs it
// and ALPN would pick HTTP/2.
func (c *Client) upgradeClient() *http.Client {
	tr, ok := c.http.Transport.(*http.Transport)
	if !ok || c.base.Scheme != "https" {
		return c.http
	}
	tr = tr.Clone()
	tr.Protocols = new(http.Protocols)
	tr.Protocols.SetHTTP1(true)
	hc := *c.http
	hc.Transport = tr
	return &hc
}

// Read returns the next chunk of the command's output. Once the command
// ended it returns io.EOF, and Wait tells how it ended.
func (s *PtySession) Read(ctx context.Context) (PtyOutput, error) {
	for {
		if s.exit != nil {
			return PtyOutput{}, io.EOF
		}
		if s.err != nil {
			return PtyOutput{}, s.err
		}
		typ, data, err := s.conn.Read(ctx)
		if err != nil {
			s.err = s.ended(ctx, err)
			continue
		}
		if typ == websocket.MessageText {
			s.control(data)
			continue
		}
		switch {
		case !s.pipes:
			return PtyOutput{Data: data}, nil
		case len(data) > 0 && data[0] == PtyStdout:
			return PtyOutput{Stream: Stdout, Data: data[1:]}, nil
		case len(data) > 0 && data[0] == PtyStderr:
			return PtyOutput{Stream: Stderr, Data: data[1:]}, nil
		}
	}
}

// Wait reads the rest of the output, discarding it, and returns how the
// command ended.
func (s *PtySession) Wait(ctx context.Context) (*PtyExit, error) {
	return s.Copy(ctx, io.Discard, io.Discard)
}

// Copy writes the command's output to stdout, or, without a terminal,
// its stderr to stderr, until the command ends, and returns how it did.
func (s *PtySession) Copy(ctx context.Context, stdout, stderr io.Writer) (*PtyExit, error) {
	for {
		out, err := s.Read(ctx)
		if errors.Is(err, io.EOF) {
			return s.exit, nil
		}
		if err != nil {
			return nil, err
		}
		w := stdout
		if out.Stream == Stderr {
			w = stderr
		}
		if _, err := w.Write(out.Data); err != nil {
			return nil, err
		}
	}
}

// control takes a text frame the daemon sent beside the output.
func (s *PtySession) control(data []byte) {
	var head struct {
		Type string `json:"type"`
		errorBody
	}
	if json.Unmarshal(data, &head) != nil {
		return
	}
	switch head.Type {
	case PtyExited:
		var exit PtyExit
		if err := json.Unmarshal(data, &exit); err != nil {
			s.err = fmt.Errorf("terminal session: decode the exit of process %d: %w", s.Pid, err)
			return
		}
		s.exit = &exit
	case PtyError:
		if head.Error != nil {
			s.failure = &Error{Code: head.Error.Code, Message: head.Error.Message}
		}
	}
}

// ended says why the connection ended with err, before the exit.
func (s *PtySession) ended(ctx context.Context, err error) error {
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case s.failure != nil:
		return s.failure
	}
	return fmt.Errorf("terminal session of process %d ended before its exit: %w", s.Pid, err)
}

// readStart reads the first frame, which says the command runs, or why
// it does not.
func (s *PtySession) readStart(ctx context.Context) error {
	typ, data, err := s.conn.Read(ctx)
	if err != nil {
		return s.ended(ctx, err)
	}
	var head struct {
		PtyStart
		errorBody
	}
	if typ != websocket.MessageText || json.Unmarshal(data, &head) != nil {
		return fmt.Errorf("terminal session: the daemon's first frame is %q, not %s", bytes.TrimSpace(data[:min(len(data), 80)]), PtyStarted)
	}
	switch {
	case head.Type == PtyError && head.Error != nil:
		return &Error{Code: head.Error.Code, Message: head.Error.Message}
	case head.Type != PtyStarted:
		return fmt.Errorf("terminal session: the daemon's first frame is %s, not %s", head.Type, PtyStarted)
	}
	s.Pid = head.Pid
	return nil
}

// Write sends input: what is typed, with a terminal.
func (s *PtySession) Write(ctx context.Context, p []byte) error {
	for len(p) > 0 {
		n := min(len(p), maxPtyFrame)
		if err := s.conn.Write(ctx, websocket.MessageBinary, p[:n]); err != nil {
			return fmt.Errorf("terminal session: write input: %w", err)
		}
		p = p[n:]
	}
	return nil
}

// Resize sets the terminal's size; the command gets SIGWINCH.
func (s *PtySession) Resize(ctx context.Context, cols, rows int) error {
	return s.send(ctx, PtyControl{Type: PtyResize, Cols: cols, Rows: rows})
}

// Signal sends the command's main process a signal by name (INT, TERM,
// HUP, QUIT, USR1, USR2, with or without SIG); KILL kills its whole
// process tree.
func (s *PtySession) Signal(ctx context.Context, signal string) error {
	return s.send(ctx, PtyControl{Type: PtySignal, Signal: signal})
}

// CloseInput ends the input: without a terminal the command's stdin reads
// EOF; with one, the terminal reads a ^D.
func (s *PtySession) CloseInput(ctx context.Context) error {
	return s.send(ctx, PtyControl{Type: PtyEOF})
}

func (s *PtySession) send(ctx context.Context, m PtyControl) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := s.conn.Write(ctx, websocket.MessageText, b); err != nil {
		return fmt.Errorf("terminal session: send %s: %w", m.Type, err)
	}
	return nil
}

// Close closes the session; the daemon kills the command's process tree
// if it still runs.
func (s *PtySession) Close() error {
	return s.conn.CloseNow()
}
