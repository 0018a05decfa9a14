package api

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/base/redact"
	"github.com/hutchdev/hutch/internal/core/exec"
)

// maxOutput caps each stream of a non-streamed exec; the rest is dropped
// (and said so), so a flood cannot grow the daemon's memory.
const maxOutput = 1 << 20

func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	var req client.ExecRequest
	if err := decode(r, &req); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	sreq := exec.Request{
		Cmd: req.Cmd, Command: req.Command, Cwd: req.Cwd, Env: req.Env, User: req.User,
		Timeout: time.Duration(req.TimeoutS) * time.Second, ForUser: callerOf(r.Context()).user,
	}
	if req.Stdin != "" {
		sreq.Stdin = &req.Stdin
	}
	id := r.PathValue("id")
	s.answerExec(w, r, func(ctx context.Context, out exec.Output) (exec.Result, error) {
		return s.execs.Exec(ctx, id, sreq, out)
	})
}

// runCode runs code in a language; it answers as exec does.
func (s *Server) runCode(w http.ResponseWriter, r *http.Request) {
	var req client.CodeRequest
	if err := decode(r, &req); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	if req.ContextID != "" {
		s.runInContext(w, r, req)
		return
	}
	creq := exec.CodeRequest{
		Language: req.Language, Code: req.Code, Cwd: req.Cwd, Env: req.Env,
		Timeout: time.Duration(req.TimeoutS) * time.Second, ForUser: callerOf(r.Context()).user,
	}
	id := r.PathValue("id")
	s.answerExec(w, r, func(ctx context.Context, out exec.Output) (exec.Result, error) {
		return s.execs.RunCode(ctx, id, creq, out)
	})
}

// answerExec runs a command with run and answers with its result: server-
// sent events as it writes when the client accepts them, else one JSON
// result at the end.
func (s *Server) answerExec(w http.ResponseWriter, r *http.Request, run func(context.Context, exec.Output) (exec.Result, error)) {
	if acceptsEvents(r) {
		s.execStream(w, r, run)
		return
	}
	var stdout, stderr capped
	res, err := run(r.Context(), collect(&stdout, &stderr))
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, client.ExecResult{
		ExitCode: res.ExitCode, Stdout: stdout.String(), Stderr: stderr.String(),
		DurationMS: res.Duration.Milliseconds(), TimedOut: res.TimedOut,
		Truncated: stdout.truncated || stderr.truncated, KilledBy: res.KilledBy,
	})
}

// capped keeps the first maxOutput bytes written to it.
type capped struct {
	bytes.Buffer
	truncated bool
}

// collect is an Output into stdout and stderr.
func collect(stdout, stderr *capped) exec.Output {
	return func(st exec.Stream, data []byte) error {
		if st == exec.Stdout {
			stdout.Write(data)
		} else {
			stderr.Write(data)
		}
		return nil
	}
}

func (c *capped) Write(p []byte) {
	room := maxOutput - c.Len()
	if len(p) > room {
		p, c.truncated = p[:max(room, 0)], true
	}
	c.Buffer.Write(p)
}

// execStream answers with server-sent events as the command writes. Errors
// before the first event are plain JSON errors; later ones are an "error"
// event.
func (s *Server) execStream(w http.ResponseWriter, r *http.Request, run func(context.Context, exec.Output) (exec.Result, error)) {
	sse := &sseWriter{w: w}
	text := s.outputEvents(sse)
	res, err := run(r.Context(), text.send)
	if err == nil {
		err = text.flush()
	}
	s.endStream(w, r, sse, err, "exit", client.ExecExit{
		ExitCode: res.ExitCode, DurationMS: res.Duration.Milliseconds(),
		TimedOut: res.TimedOut, KilledBy: res.KilledBy,
	})
}

// acceptsEvents says whether the client asked for server-sent events.
func acceptsEvents(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

// utf8Carry passes output on to emit, each stream with the secrets the
// daemon knows of redacted (a secret cut between two chunks too), holding
// back a character cut between two chunks until the rest of it comes.
type utf8Carry struct {
	emit    func(st exec.Stream, text []byte) error
	held    map[exec.Stream][]byte
	secrets *redact.Set
	redact  map[exec.Stream]*redact.Stream
}

func (c *utf8Carry) send(st exec.Stream, data []byte) error {
	if c.held == nil {
		c.held, c.redact = map[exec.Stream][]byte{}, map[exec.Stream]*redact.Stream{}
	}
	if c.secrets.Len() > 0 {
		if c.redact[st] == nil {
			c.redact[st] = c.secrets.Stream()
		}
		data = c.redact[st].Next(data)
	}
	text, rest := splitUTF8(append(c.held[st], data...))
	c.held[st] = rest
	if len(text) == 0 {
		return nil
	}
	return c.emit(st, text)
}

// outputEvents sends output as stdout and stderr events, with secrets
// redacted.
func (s *Server) outputEvents(sse *sseWriter) *utf8Carry {
	return &utf8Carry{
		emit:    func(st exec.Stream, text []byte) error { return sse.event(string(st), outputEvent(text)) },
		secrets: s.redactor.Set(),
	}
}

// flush passes on what was held back.
func (c *utf8Carry) flush() error {
	for _, st := range []exec.Stream{exec.Stdout, exec.Stderr} {
		if r := c.redact[st]; r != nil {
			c.held[st] = append(c.held[st], r.End()...)
		}
		if len(c.held[st]) > 0 {
			if err := c.emit(st, c.held[st]); err != nil {
				return err
			}
		}
	}
	return nil
}

// endStream ends an event stream: with the last event, name and v, or with
// err. An error before the first event is a plain JSON error; a later one
// is an "error" event.
func (s *Server) endStream(w http.ResponseWriter, r *http.Request, sse *sseWriter, err error, name string, v any) {
	switch {
	case err != nil && !sse.started:
		writeError(w, r, s.log, err)
	case err != nil:
		status, _ := statusOf(err)
		if status == http.StatusInternalServerError {
			s.log.Error("event stream failed", "path", r.URL.Path, "error", err)
		}
		_ = sse.event("error", errorBody{Error: describe(err)})
	default:
		_ = sse.event(name, v)
	}
}

// outputData is the data of a stdout or stderr event: text when the bytes
// are UTF-8, base64 otherwise.
type outputData struct {
	Data       *string `json:"data,omitempty"`
	DataBase64 string  `json:"data_base64,omitempty"`
}

func outputEvent(b []byte) outputData {
	if utf8.Valid(b) {
		s := string(b)
		return outputData{Data: &s}
	}
	return outputData{DataBase64: base64.StdEncoding.EncodeToString(b)}
}

// splitUTF8 splits off an incomplete UTF-8 sequence at the end of b (a
// character cut between two reads), to be sent with the next chunk.
func splitUTF8(b []byte) (complete, rest []byte) {
	for i := 1; i <= 3 && i <= len(b); i++ {
		c := b[len(b)-i]
		if !utf8.RuneStart(c) {
			continue
		}
		if !utf8.FullRune(b[len(b)-i:]) {
			return b[:len(b)-i], append([]byte(nil), b[len(b)-i:]...)
		}
		break
	}
	return b, nil
}

// begin writes the stream's head, if not yet: at the first event, or at
// once for a stream whose first event may be long in coming (then flush).
func (s *sseWriter) begin() {
	if s.started {
		return
	}
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	s.w.WriteHeader(http.StatusOK)
	s.started = true
}

// sseWriter writes server-sent events, flushing each.
type sseWriter struct {
	w       http.ResponseWriter
	started bool
}

func (s *sseWriter) event(name string, v any) error {
	return s.eventWithID("", name, v)
}

// eventWithID is event with an id ("": none), which a client that
// reconnects sends back as Last-Event-ID.
func (s *sseWriter) eventWithID(id, name string, v any) error {
	s.begin()
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if id != "" {
		if _, err := fmt.Fprintf(s.w, "id: %s\n", id); err != nil {
			return err
		}
	}
	if _, err := fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", name, data); err != nil {
		return err
	}
	return http.NewResponseController(s.w).Flush()
}
