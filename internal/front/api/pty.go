package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/base/redact"
	"github.com/hutchdev/hutch/internal/core/exec"
)

// Terminals: GET /v1/sandboxes/{id}/pty upgrades to a WebSocket over
// which a command with a terminal (or, with tty=false, with pipes) runs
// as it is typed to. The protocol (api/openapi.yaml tells it to clients):
//
//   - client → daemon: binary frames are input; text frames are JSON
//     control messages, {"type":"resize","cols":N,"rows":N},
//     {"type":"signal","signal":"INT"} and {"type":"eof"}.
//   - daemon → client: binary frames are output, the terminal's bytes,
//     or without a terminal a stream byte (1 stdout, 2 stderr) and the
//     data; text frames are JSON: {"type":"started","pid":N} first,
//     {"type":"exit",...} last (then a normal close), and
//     {"type":"error","error":{...}} for a control message refused, or a
//     session that failed (then close 1011).
//
// A browser, which cannot set headers on a WebSocket, offers its key as
// the subprotocol hutch.bearer.<key> beside hutch.v1, which the daemon
// picks (see presentedKey).
//
// Errors before the upgrade (an unknown sandbox, a bad query, a command
// the agent refuses) are the API's JSON errors. The session holds its
// sandbox running; when the connection drops, the command's whole process
// tree is killed.
//
// Why github.com/coder/websocket: a small library kept by Coder (whose
// product is remote terminals), with a context on every call and
// concurrent writes allowed, which a session's two directions need; the
// standard library has no WebSocket, and x/net/websocket is deprecated in
// its own documentation.

// Bounds and timings of a session.
const (
	defaultCols, defaultRows = 80, 24
	// maxInputFrame is the largest frame a client may send; the Go
	// client sends at most 32 KiB.
	maxInputFrame = 64 << 10
	// ptyPing is how often the daemon checks that the client is there: a
	// connection that died without a close (a laptop's lid shut) must
	// not hold the sandbox and its processes for ever.
	ptyPing        = 30 * time.Second
	ptyPingTimeout = 15 * time.Second
	// redactFlush is how long output held back by redaction (the start
	// of what could be a secret) waits for more before it goes out: a
	// terminal's echo must not wait for the next keystroke.
	redactFlush = 20 * time.Millisecond
)

func (s *Server) pty(w http.ResponseWriter, r *http.Request) {
	req, err := ptyQuery(r)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	if !isWebSocket(r) {
		writeError(w, r, s.log, errdefs.InvalidArgument("this route is a WebSocket: connect with Upgrade: websocket (hutch exec -it, or the Go client's Pty)"))
		return
	}
	req.ForUser = callerOf(r.Context()).user
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	term, err := s.execs.OpenTerminal(ctx, r.PathValue("id"), req)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	defer func() {
		if err := term.Close(); err != nil {
			s.log.Warn("close terminal", "path", r.URL.Path, "error", err)
		}
	}()
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{wsProtocol}})
	if err != nil {
		return // Accept answered
	}
	defer func() { _ = conn.CloseNow() }()
	conn.SetReadLimit(maxInputFrame)
	sess := &ptySession{s: s, conn: conn, term: term, tty: req.TTY}
	var wg sync.WaitGroup
	// The client's side ends the session when it goes away.
	wg.Go(func() {
		defer cancel()
		sess.readInput(ctx)
	})
	wg.Go(func() {
		defer cancel()
		sess.ping(ctx)
	})
	sess.sendOutput(ctx)
	cancel()
	_ = conn.CloseNow()
	wg.Wait()
}

// ptyQuery reads a session's query: cmd, cwd, user, env (K=V, repeated),
// tty (default true), cols and rows (default 80x24).
func ptyQuery(r *http.Request) (exec.TerminalRequest, error) {
	q := r.URL.Query()
	req := exec.TerminalRequest{Command: q.Get("cmd"), Cwd: q.Get("cwd"), User: q.Get("user")}
	var err error
	if req.TTY, err = boolQuery(r, "tty", true); err != nil {
		return req, err
	}
	for _, kv := range q["env"] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return req, errdefs.InvalidArgument("env must be K=V, got %q", kv)
		}
		if req.Env == nil {
			req.Env = map[string]string{}
		}
		req.Env[k] = v
	}
	if req.Cols, err = intParam(r, "cols", defaultCols); err != nil {
		return req, err
	}
	if req.Rows, err = intParam(r, "rows", defaultRows); err != nil {
		return req, err
	}
	return req, nil
}

// isWebSocket says whether r asks to upgrade to a WebSocket.
func isWebSocket(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// ptySession is one session's connection and command.
type ptySession struct {
	s    *Server
	conn *websocket.Conn
	term *exec.Terminal
	tty  bool
}

// sendOutput sends started, the command's output (redacted) and its exit,
// until the command ends or ctx does.
func (p *ptySession) sendOutput(ctx context.Context) {
	if err := p.sendJSON(ctx, client.PtyStart{Type: client.PtyStarted, Pid: p.term.Pid}); err != nil {
		return
	}
	out := newPtyOutput(ctx, p.conn, p.s.redactor, p.tty)
	defer out.stop()
	for {
		ev, err := p.term.Recv()
		if err != nil {
			if ctx.Err() == nil {
				p.fail(ctx, err)
			}
			return
		}
		if ev.Exit != nil {
			if out.flush() != nil {
				return
			}
			exit := client.PtyExit{Type: client.PtyExited, Signal: ev.Exit.Signal, ExecExit: client.ExecExit{
				ExitCode: ev.Exit.ExitCode, DurationMS: ev.Exit.Duration.Milliseconds(),
				TimedOut: ev.Exit.TimedOut, KilledBy: ev.Exit.KilledBy,
			}}
			if p.sendJSON(ctx, exit) == nil {
				_ = p.conn.Close(websocket.StatusNormalClosure, "")
			}
			return
		}
		if err := out.write(ev.Stream, ev.Data); err != nil {
			return // the client is gone
		}
	}
}

// readInput passes the client's input and control messages on until the
// connection ends.
func (p *ptySession) readInput(ctx context.Context) {
	for {
		typ, data, err := p.conn.Read(ctx)
		if err != nil {
			return
		}
		if typ == websocket.MessageBinary {
			err = p.term.Write(ctx, data)
		} else {
			err = p.control(ctx, data)
		}
		// Input to a command that just ended fails: its exit follows.
		if err != nil && ctx.Err() == nil && !errors.Is(err, errdefs.ErrNotFound) {
			_ = p.sendError(ctx, err)
		}
	}
}

// control does what a client's text frame says.
func (p *ptySession) control(ctx context.Context, data []byte) error {
	var m client.PtyControl
	if err := json.Unmarshal(data, &m); err != nil {
		return errdefs.InvalidArgument("a text frame is a JSON control message: %v", err)
	}
	switch m.Type {
	case client.PtyResize:
		return p.term.Resize(ctx, m.Cols, m.Rows)
	case client.PtySignal:
		return p.term.Signal(ctx, m.Signal)
	case client.PtyEOF:
		return p.term.CloseInput(ctx)
	}
	return errdefs.InvalidArgument("unknown control message type %q: resize, signal or eof", m.Type)
}

// ping checks, now and then, that the client still answers.
func (p *ptySession) ping(ctx context.Context) {
	t := time.NewTicker(ptyPing)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, ptyPingTimeout)
		err := p.conn.Ping(pctx)
		cancel()
		if err != nil {
			return
		}
	}
}

// fail ends a session whose stream failed: an error frame, then close
// 1011.
func (p *ptySession) fail(ctx context.Context, err error) {
	if status, _ := statusOf(err); status == http.StatusInternalServerError {
		p.s.log.Error("terminal session failed", "pid", p.term.Pid, "error", err)
	}
	if p.sendError(ctx, err) == nil {
		_ = p.conn.Close(websocket.StatusInternalError, "the session failed")
	}
}

func (p *ptySession) sendError(ctx context.Context, err error) error {
	return p.sendJSON(ctx, struct {
		Type string `json:"type"`
		errorBody
	}{client.PtyError, errorBody{Error: describe(err)}})
}

func (p *ptySession) sendJSON(ctx context.Context, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return p.conn.Write(ctx, websocket.MessageText, p.s.redactor.Set().Bytes(b))
}

// ptyOutput sends a session's output as binary frames, each stream
// redacted of the secrets the daemon knows of (see redaction.go). What
// redaction holds back goes out after redactFlush without more output.
type ptyOutput struct {
	writers map[exec.Stream]*redact.Writer
	timer   *time.Timer
}

func newPtyOutput(ctx context.Context, conn *websocket.Conn, r *redact.Redactor, tty bool) *ptyOutput {
	// Without a terminal, a frame's first byte says its stream.
	stream := func(b byte) *redact.Writer {
		return r.Writer(frameWriter(func(data []byte) error {
			return conn.Write(ctx, websocket.MessageBinary, append([]byte{b}, data...))
		}))
	}
	o := &ptyOutput{writers: map[exec.Stream]*redact.Writer{}}
	if tty {
		o.writers[""] = r.Writer(frameWriter(func(data []byte) error {
			return conn.Write(ctx, websocket.MessageBinary, data)
		}))
	} else {
		o.writers[exec.Stdout] = stream(client.PtyStdout)
		o.writers[exec.Stderr] = stream(client.PtyStderr)
	}
	o.timer = time.AfterFunc(time.Hour, func() { _ = o.flush() })
	o.timer.Stop()
	return o
}

func (o *ptyOutput) write(st exec.Stream, data []byte) error {
	w, ok := o.writers[st]
	if !ok {
		return nil
	}
	if _, err := w.Write(data); err != nil {
		return err
	}
	o.timer.Reset(redactFlush)
	return nil
}

// flush sends what redaction holds back.
func (o *ptyOutput) flush() error {
	var errs []error
	for _, w := range o.writers {
		errs = append(errs, w.Flush())
	}
	return errors.Join(errs...)
}

func (o *ptyOutput) stop() { o.timer.Stop() }

// frameWriter sends each write as one frame.
type frameWriter func(b []byte) error

func (f frameWriter) Write(b []byte) (int, error) {
	if err := f(b); err != nil {
		return 0, err
	}
	return len(b), nil
}
