package e2b

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/base/redact"
	"github.com/hutchdev/hutch/internal/core/exec"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
)

// E2B's code interpreter: the API that @e2b/code-interpreter calls on a
// sandbox's port 49999, served on Hutch's code contexts
// (internal/core/exec/contexts.go) instead of a Jupyter server in the sandbox.
//
//	POST   /execute                {code, context_id?, language?, env_vars?} → lines of JSON
//	POST   /contexts               {language?, cwd?} → {id, language, cwd}
//	GET    /contexts               → [{id, language, cwd}]
//	POST   /contexts/{id}/restart  → null
//	DELETE /contexts/{id}          → null
//
// An execution's answer is one JSON object a line, each flushed as it
// comes: stdout, stderr, result and error lines, a keepalive line
// whenever the code has been silent for codeKeepalive, then
// number_of_executions and, always last, end_of_execution. Errors before
// the answer starts are plain text, as E2B's server gives them (its SDKs
// show the body as the error's message). A client that goes away
// interrupts the code.
//
// An execution that names no context runs in its language's default
// context, "default-<language>", made on first use: the one Hutch's
// sandbox_run_code tool uses too (internal/core/toolrun/code.go), so both see
// the same state. No secret value the daemon knows of leaves in an
// answer: lines, errors and listings are redacted as the REST API's are
// (internal/front/api/redaction.go), each stream of output across its chunks.

// Contexts is what the interpreter needs of Hutch's code contexts
// (exec.Service has it). id is the sandbox's.
type Contexts interface {
	CreateContext(ctx context.Context, id string, req exec.ContextRequest) (exec.Context, error)
	Contexts(ctx context.Context, id string) ([]exec.Context, error)
	RestartContext(ctx context.Context, id, contextID string) (exec.Context, error)
	DeleteContext(ctx context.Context, id, contextID string) error
	RunInContext(ctx context.Context, id string, req exec.ContextCode, fn func(exec.CodeEvent) error) (exec.CodeEnd, error)
}

var _ Contexts = (*exec.Service)(nil)

const (
	// codeKeepalive is how long an execution's answer stays silent before
	// a keepalive line, as E2B's server sends them: a client that has gone
	// is found out at the next write.
	codeKeepalive = 5 * time.Second
	// codeTimeout bounds an execution. E2B's server sets none: its
	// clients do, and going away interrupts the code.
	codeTimeout = exec.MaxCodeTimeout
	// codeRestoreTimeout bounds the cell that puts back the environment
	// an execution's env_vars changed.
	codeRestoreTimeout = 30 * time.Second
	// maxCodeBody bounds a request's body.
	maxCodeBody = 16 << 20
)

// Interpreter serves E2B's code interpreter API of sandboxes.
type Interpreter struct {
	contexts  Contexts
	redactor  *redact.Redactor
	log       *slog.Logger
	keepalive time.Duration // codeKeepalive, shorter in tests
}

// NewInterpreter returns an Interpreter on c, redacting its answers with
// redactor. A nil log discards.
func NewInterpreter(c Contexts, redactor *redact.Redactor, log *slog.Logger) *Interpreter {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Interpreter{contexts: c, redactor: redactor, log: log, keepalive: codeKeepalive}
}

// ServeSandbox serves r, a request of E2B's code interpreter API (port
// 49999) for sandbox id; the caller has authenticated it and checked the
// workspace. It routes on r.URL.Path by codeRouteOf, as the front's check
// did (openRoute): /execute, /contexts, /contexts/{id}/restart,
// /contexts/{id} or /health, spelled exactly so.
func (in *Interpreter) ServeSandbox(w http.ResponseWriter, r *http.Request, id string) {
	rt, ok := codeRouteOf(r.URL.Path)
	if !ok || r.URL.RawPath != "" {
		in.writeText(w, http.StatusNotFound, "Not Found")
		return
	}
	switch rt.name {
	case codeExecute:
		if in.allow(w, r, http.MethodPost) {
			in.execute(w, r, id)
		}
	case codeContexts:
		if in.allow(w, r, http.MethodGet, http.MethodPost) {
			if r.Method == http.MethodGet {
				in.listContexts(w, r, id)
			} else {
				in.createContext(w, r, id)
			}
		}
	case codeRestart:
		if in.allow(w, r, http.MethodPost) {
			_, err := in.contexts.RestartContext(r.Context(), id, rt.contextID)
			in.answerContextCall(w, r, id, rt.contextID, err)
		}
	case codeContext:
		if in.allow(w, r, http.MethodDelete) {
			in.answerContextCall(w, r, id, rt.contextID, in.contexts.DeleteContext(r.Context(), id, rt.contextID))
		}
	case codeHealth:
		in.writeJSON(w, http.StatusOK, "OK")
	}
}

// The code interpreter's routes.
const (
	codeExecute  = "execute"  // POST /execute
	codeContexts = "contexts" // GET, POST /contexts
	codeRestart  = "restart"  // POST /contexts/{id}/restart
	codeContext  = "context"  // DELETE /contexts/{id}
	codeHealth   = "health"   // GET /health
)

// codeRoute is a code interpreter route, and the context it names.
type codeRoute struct {
	name      string
	contextID string
}

// codeRouteOf is the route of path p, spelled exactly as the SDK spells
// it; false for any other path. The front decides who may by it, and the
// interpreter serves by it: one reading of a path for both.
func codeRouteOf(p string) (codeRoute, bool) {
	switch p {
	case "/execute":
		return codeRoute{name: codeExecute}, true
	case "/contexts":
		return codeRoute{name: codeContexts}, true
	case "/health":
		return codeRoute{name: codeHealth}, true
	}
	rest, ok := strings.CutPrefix(p, "/contexts/")
	if !ok {
		return codeRoute{}, false
	}
	contextID, action, more := strings.Cut(rest, "/")
	switch {
	case contextID == "" || contextID == "." || contextID == "..":
		return codeRoute{}, false
	case !more:
		return codeRoute{name: codeContext, contextID: contextID}, true
	case action == "restart":
		return codeRoute{name: codeRestart, contextID: contextID}, true
	}
	return codeRoute{}, false
}

// open says whether a call of method on rt is one E2B's SDK makes without
// the access token (its /contexts calls, and /health): every other call,
// /execute's first, needs it.
func (rt codeRoute) open(method string) bool {
	switch rt.name {
	case codeHealth:
		return method == http.MethodGet
	case codeContexts:
		return method == http.MethodGet || method == http.MethodPost
	case codeRestart:
		return method == http.MethodPost
	case codeContext:
		return method == http.MethodDelete
	}
	return false
}

// allow says whether r's method is one of methods, answering 405 when not.
func (in *Interpreter) allow(w http.ResponseWriter, r *http.Request, methods ...string) bool {
	if slices.Contains(methods, r.Method) {
		return true
	}
	w.Header().Set("Allow", strings.Join(methods, ", "))
	in.writeText(w, http.StatusMethodNotAllowed, "Method Not Allowed")
	return false
}

// codeContextJSON is a context as E2B tells it.
type codeContextJSON struct {
	ID       string `json:"id"`
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
}

func codeContextOf(c exec.Context) codeContextJSON {
	return codeContextJSON{ID: c.ID, Language: c.Language, Cwd: c.Cwd}
}

func (in *Interpreter) createContext(w http.ResponseWriter, r *http.Request, id string) {
	var req struct {
		Language string `json:"language"`
		Cwd      string `json:"cwd"`
	}
	if err := decodeCodeBody(w, r, &req); err != nil && !errors.Is(err, errEmptyCodeBody) { // {} may be left out
		in.writeText(w, http.StatusBadRequest, err.Error())
		return
	}
	c, err := in.contexts.CreateContext(r.Context(), id, exec.ContextRequest{Language: codeLanguage(req.Language), Cwd: codeCwd(req.Cwd)})
	if err != nil {
		in.writeError(w, r, id, err)
		return
	}
	in.writeJSON(w, http.StatusOK, codeContextOf(c))
}

func (in *Interpreter) listContexts(w http.ResponseWriter, r *http.Request, id string) {
	cs, err := in.contexts.Contexts(r.Context(), id)
	if err != nil {
		in.writeError(w, r, id, err)
		return
	}
	out := []codeContextJSON{}
	for _, c := range cs {
		out = append(out, codeContextOf(c))
	}
	in.writeJSON(w, http.StatusOK, out)
}

// answerContextCall answers a restart or a delete of contextID: null, as
// E2B's server does, or err.
func (in *Interpreter) answerContextCall(w http.ResponseWriter, r *http.Request, id, contextID string, err error) {
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		in.writeText(w, http.StatusNotFound, "Context "+contextID+" not found")
	case err != nil:
		in.writeError(w, r, id, err)
	default:
		in.writeJSON(w, http.StatusOK, nil)
	}
}

// codeExecuteRequest is POST /execute's body.
type codeExecuteRequest struct {
	Code      string            `json:"code"`
	ContextID string            `json:"context_id"`
	Language  string            `json:"language"`
	EnvVars   map[string]string `json:"env_vars"`
}

func (in *Interpreter) execute(w http.ResponseWriter, r *http.Request, id string) {
	var req codeExecuteRequest
	if err := decodeCodeBody(w, r, &req); err != nil {
		in.writeText(w, http.StatusBadRequest, err.Error())
		return
	}
	if req.ContextID != "" && req.Language != "" {
		in.writeText(w, http.StatusBadRequest, "give context_id or language, not both")
		return
	}
	if err := checkCodeEnv(req.EnvVars); err != nil {
		in.writeText(w, http.StatusBadRequest, err.Error())
		return
	}
	c, err := in.executionContext(r.Context(), id, req)
	if errors.Is(err, errdefs.ErrNotFound) && req.ContextID != "" {
		in.writeText(w, http.StatusNotFound, "Context "+req.ContextID+" not found")
		return
	}
	if err != nil {
		in.writeError(w, r, id, err)
		return
	}
	code, restore := req.Code, ""
	if len(req.EnvVars) > 0 {
		if code, restore, err = codeEnvCells(c.Language, req.EnvVars, req.Code); err != nil {
			in.writeText(w, http.StatusBadRequest, err.Error())
			return
		}
	}
	in.run(w, r, id, c.ID, code, restore)
}

// run runs code in contextID, then restore when there is one, and answers
// with what the code gives, line by line.
func (in *Interpreter) run(w http.ResponseWriter, r *http.Request, id, contextID, code, restore string) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	out := &codeLines{w: w, rc: http.NewResponseController(w), secrets: in.redactor.Set(), wrote: make(chan struct{}, 1)}
	_ = out.rc.Flush() // the headers, at once: the code may be silent a long while
	stop := make(chan struct{})
	var keepalive sync.WaitGroup
	keepalive.Go(func() { out.keepAlive(in.keepalive, stop) })

	run := &codeRun{out: out}
	run.text[0] = codeText{kind: "stdout", redact: out.secrets.Stream()}
	run.text[1] = codeText{kind: "stderr", redact: out.secrets.Stream()}
	end, err := in.contexts.RunInContext(r.Context(), id, exec.ContextCode{ContextID: contextID, Code: code, Timeout: codeTimeout}, run.event)
	if restore != "" {
		in.restoreEnv(r.Context(), id, contextID, restore)
	}
	close(stop)
	keepalive.Wait()
	if r.Context().Err() != nil || out.failed() {
		return // the client has gone: nobody reads the rest
	}
	in.endExecution(run, id, end, err)
}

// executionContext is the context req runs in: the one it names, or its
// language's default one, made on first use.
func (in *Interpreter) executionContext(ctx context.Context, id string, req codeExecuteRequest) (exec.Context, error) {
	if req.ContextID != "" {
		cs, err := in.contexts.Contexts(ctx, id)
		if err != nil {
			return exec.Context{}, err
		}
		i := slices.IndexFunc(cs, func(c exec.Context) bool { return c.ID == req.ContextID })
		if i < 0 {
			return exec.Context{}, errdefs.NotFound("context %s", req.ContextID)
		}
		return cs[i], nil
	}
	language := codeLanguage(req.Language)
	return in.contexts.CreateContext(ctx, id, exec.ContextRequest{
		Language: language, Cwd: rootfs.UserHome, ID: "default-" + language,
	})
}

// restoreEnv runs the cell that puts back what an execution's env_vars
// changed, even when the client has gone, and before the execution's
// answer ends: the client's next execution does not see them.
func (in *Interpreter) restoreEnv(ctx context.Context, id, contextID, cell string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), codeRestoreTimeout)
	defer cancel()
	var failed *exec.CodeError
	_, err := in.contexts.RunInContext(ctx, id, exec.ContextCode{ContextID: contextID, Code: cell, Timeout: codeRestoreTimeout}, func(ev exec.CodeEvent) error {
		if ev.Error != nil {
			failed = ev.Error
		}
		return nil
	})
	if err == nil && failed != nil {
		err = fmt.Errorf("%s: %s", failed.Name, failed.Value)
	}
	if err != nil {
		in.log.Warn("restore the environment after an execution", "sandbox_id", id, "context", contextID, "error", err)
	}
}

// endExecution writes an execution's last lines: what its output streams
// held back, its failure, its count, and end_of_execution.
func (in *Interpreter) endExecution(run *codeRun, id string, end exec.CodeEnd, err error) {
	for i := range run.text {
		if err := run.flush(&run.text[i], run.text[i].end()); err != nil {
			return
		}
	}
	switch {
	case err != nil:
		status, msg := codeErrorAnswer(err)
		if status == http.StatusInternalServerError {
			in.log.Error("execute code", "sandbox_id", id, "error", err)
		}
		run.sendError("UnexpectedEndOfExecution", msg)
	case end.TimedOut && !run.errored:
		run.sendError("TimeoutError", fmt.Sprintf("the execution ran past %s and was interrupted", codeTimeout))
	}
	if end.ExecutionCount > 0 {
		_ = run.out.send(codeCountLine{Type: "number_of_executions", ExecutionCount: end.ExecutionCount})
	}
	_ = run.out.send(codeTypeLine{Type: "end_of_execution"})
}

// The lines of an execution's answer.
type (
	codeTypeLine struct {
		Type string `json:"type"`
	}
	codeOutputLine struct {
		Type      string `json:"type"` // stdout or stderr
		Text      string `json:"text"`
		Timestamp string `json:"timestamp"`
	}
	codeErrorLine struct {
		Type      string `json:"type"`
		Name      string `json:"name"`
		Value     string `json:"value"`
		Traceback string `json:"traceback"`
	}
	codeCountLine struct {
		Type           string `json:"type"`
		ExecutionCount int    `json:"execution_count"`
	}
	// codeResultLine is a result: its MIME bundle by E2B's names for
	// the types (the rest in extra), and whether it is the cell's value
	// (execute_result) rather than something it displayed.
	codeResultLine struct {
		Type         string                     `json:"type"`
		Text         *string                    `json:"text,omitempty"`
		HTML         json.RawMessage            `json:"html,omitempty"`
		Markdown     json.RawMessage            `json:"markdown,omitempty"`
		SVG          json.RawMessage            `json:"svg,omitempty"`
		PNG          json.RawMessage            `json:"png,omitempty"`
		JPEG         json.RawMessage            `json:"jpeg,omitempty"`
		PDF          json.RawMessage            `json:"pdf,omitempty"`
		LaTeX        json.RawMessage            `json:"latex,omitempty"`
		JSON         json.RawMessage            `json:"json,omitempty"`
		JavaScript   json.RawMessage            `json:"javascript,omitempty"`
		Data         json.RawMessage            `json:"data,omitempty"`
		Chart        json.RawMessage            `json:"chart,omitempty"`
		Extra        map[string]json.RawMessage `json:"extra,omitempty"`
		IsMainResult bool                       `json:"is_main_result"`
	}
)

// codeResultOf is a kernel's result as E2B tells it.
func codeResultOf(r *exec.CodeResult) codeResultLine {
	out := codeResultLine{Type: "result", IsMainResult: r.Main}
	for mime, v := range r.Data {
		if len(v) == 0 || string(v) == "null" {
			continue
		}
		switch mime {
		case "text/plain":
			var text string
			if json.Unmarshal(v, &text) == nil {
				text = stripReprQuotes(text)
				out.Text = &text
			}
		case "text/html":
			out.HTML = v
		case "text/markdown":
			out.Markdown = v
		case "image/svg+xml":
			out.SVG = v
		case "image/png":
			out.PNG = v
		case "image/jpeg":
			out.JPEG = v
		case "application/pdf":
			out.PDF = v
		case "text/latex":
			out.LaTeX = v
		case "application/json":
			out.JSON = v
		case "application/javascript":
			out.JavaScript = v
		case "e2b/data":
			out.Data = v
		case "e2b/chart":
			out.Chart = v
		default:
			if out.Extra == nil {
				out.Extra = map[string]json.RawMessage{}
			}
			out.Extra[mime] = v
		}
	}
	return out
}

// stripReprQuotes strips the quotes around a string's repr ("'abc'"), as
// E2B's server does.
func stripReprQuotes(text string) string {
	if len(text) >= 2 && (text[0] == '\'' || text[0] == '"') && text[len(text)-1] == text[0] {
		return text[1 : len(text)-1]
	}
	return text
}

// codeRun passes one execution's events on as lines.
type codeRun struct {
	out     *codeLines
	text    [2]codeText // stdout, stderr
	errored bool        // an error line was sent
}

func (run *codeRun) event(ev exec.CodeEvent) error {
	switch {
	case ev.Result != nil:
		return run.out.send(codeResultOf(ev.Result))
	case ev.Error != nil:
		run.errored = true
		return run.out.send(codeErrorLine{Type: "error", Name: ev.Error.Name, Value: ev.Error.Value, Traceback: strings.Join(ev.Error.Traceback, "")})
	case ev.Stderr != "":
		return run.flush(&run.text[1], run.text[1].next(ev.Stderr))
	default:
		return run.flush(&run.text[0], run.text[0].next(ev.Stdout))
	}
}

// flush sends text of stream t, when there is some.
func (run *codeRun) flush(t *codeText, text []byte) error {
	if len(text) == 0 {
		return nil
	}
	return run.out.send(codeOutputLine{Type: t.kind, Text: string(text), Timestamp: time.Now().UTC().Format("2006-01-02T15:04:05.000000Z07:00")})
}

func (run *codeRun) sendError(name, value string) {
	run.errored = true
	_ = run.out.send(codeErrorLine{Type: "error", Name: name, Value: value})
}

// codeText is one output stream of an execution, redacted across its
// chunks: a secret cut between two of them lands in two lines, where
// redacting each line would miss it. What redaction holds back may end
// inside a character, which waits for the rest of it.
type codeText struct {
	kind   string
	redact *redact.Stream
	held   []byte // the start of a character cut by redaction
}

// next returns the text of the stream that can go now, given s.
func (t *codeText) next(s string) []byte {
	b := append(t.held, t.redact.Next([]byte(s))...)
	b, t.held = cutRune(b)
	return b
}

// end returns what the stream held back.
func (t *codeText) end() []byte {
	b := append(t.held, t.redact.End()...)
	t.held = nil
	return b
}

// cutRune splits b before a character cut at its end.
func cutRune(b []byte) (whole, rest []byte) {
	for i := len(b) - 1; i >= 0 && i > len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i], bytes.Clone(b[i:])
			}
			break
		}
	}
	return b, nil
}

// codeLines writes an execution's answer: one JSON object a line, each
// redacted and flushed as it is written. It is safe for concurrent use:
// keepalive lines come from their own goroutine.
type codeLines struct {
	mu      sync.Mutex
	w       io.Writer
	rc      *http.ResponseController
	secrets *redact.Set
	wrote   chan struct{} // poked at each line, restarting the keepalive's wait
	err     error         // the first failed write: the client has gone
}

func (l *codeLines) send(v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // one line: Encode adds the newline
		return err
	}
	line := l.secrets.Bytes(buf.Bytes())
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	select {
	case l.wrote <- struct{}{}:
	default:
	}
	_, err := l.w.Write(line)
	if err == nil {
		if err = l.rc.Flush(); errors.Is(err, http.ErrNotSupported) {
			err = nil
		}
	}
	l.err = err
	return err
}

func (l *codeLines) failed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err != nil
}

// keepAlive sends a keepalive line whenever nothing was written for
// every, until stop is closed or a write fails.
func (l *codeLines) keepAlive(every time.Duration, stop <-chan struct{}) {
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-l.wrote:
			t.Reset(every)
		case <-t.C:
			if l.send(codeTypeLine{Type: "keepalive"}) != nil {
				return
			}
			t.Reset(every)
		}
	}
}

// codeLanguage is a language as E2B's server normalises it ("" is
// python), with the other names Hutch's contexts take for the same
// languages, so that each language has one default context.
func codeLanguage(language string) string {
	language = strings.ToLower(strings.TrimSpace(language))
	switch language {
	case "", "py", "python3":
		return "python"
	case "js", "deno":
		return "javascript"
	case "ts":
		return "typescript"
	case "sh":
		return "bash"
	}
	return language
}

// codeCwd is where a context E2B's client creates runs: cwd, relative to
// the user's home, or the home (E2B's server's default).
func codeCwd(cwd string) string {
	if path.IsAbs(cwd) {
		return path.Clean(cwd)
	}
	return path.Join(rootfs.UserHome, cwd)
}

// errEmptyCodeBody is decodeCodeBody's error for an empty body.
var errEmptyCodeBody = errors.New("the body is empty: a JSON object is expected")

// decodeCodeBody decodes r's JSON body into v.
func decodeCodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxCodeBody)).Decode(v)
	var tooBig *http.MaxBytesError
	switch {
	case errors.Is(err, io.EOF):
		return errEmptyCodeBody
	case errors.As(err, &tooBig):
		return fmt.Errorf("the body is over %d bytes", tooBig.Limit)
	case err != nil:
		return fmt.Errorf("the body is not the JSON object expected: %v", err)
	}
	return nil
}

// codeErrorAnswer is the status and the text of an error answer: what
// the user may read of err, or only what its status says. A sandbox that
// cannot be reached is 502, which E2B's SDKs take for a sandbox that
// timed out, as E2B's own proxy answers then.
func codeErrorAnswer(err error) (int, string) {
	status := http.StatusInternalServerError
	switch errdefs.Kind(err) {
	case errdefs.ErrNotFound:
		status = http.StatusNotFound
	case errdefs.ErrInvalidArgument:
		status = http.StatusBadRequest
	case errdefs.ErrAlreadyExists, errdefs.ErrConflict:
		status = http.StatusConflict
	case errdefs.ErrFailedPrecondition:
		status = http.StatusPreconditionFailed
	case errdefs.ErrResourceExhausted:
		status = http.StatusTooManyRequests
	case errdefs.ErrUnavailable, errdefs.ErrBadGateway:
		status = http.StatusBadGateway
	case errdefs.ErrNotImplemented:
		status = http.StatusNotImplemented
	}
	if msg, ok := errdefs.UserMessage(err); ok {
		return status, msg
	}
	if status == http.StatusInternalServerError {
		return status, "internal error; the daemon's log has the details"
	}
	return status, http.StatusText(status)
}

// writeError answers err as plain text, logging an internal one.
func (in *Interpreter) writeError(w http.ResponseWriter, r *http.Request, id string, err error) {
	status, msg := codeErrorAnswer(err)
	if status == http.StatusInternalServerError {
		in.log.Error("code interpreter request failed", "sandbox_id", id, "method", r.Method, "path", r.URL.Path, "error", err)
	}
	in.writeText(w, status, msg)
}

func (in *Interpreter) writeText(w http.ResponseWriter, status int, text string) {
	in.write(w, status, "text/plain; charset=utf-8", []byte(text))
}

func (in *Interpreter) writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		in.log.Error("encode an answer", "error", err)
		in.writeText(w, http.StatusInternalServerError, "internal error")
		return
	}
	in.write(w, status, "application/json", body)
}

// write answers body, redacted.
func (in *Interpreter) write(w http.ResponseWriter, status int, contentType string, body []byte) {
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	_, _ = w.Write(in.redactor.Set().Bytes(body)) // the client may be gone; nothing to do about it
}

// Environment variables of one execution. Hutch's contexts take an
// environment when they start, not per call, so, as E2B's server does,
// code that sets them runs at the start of the execution's cell (on its
// first line, so that a traceback's line numbers move by one at most) and
// a cell after it puts back what they replaced. Values are quoted as the
// language's literals (JSON's for Python and JavaScript), never pasted
// into code.

var codeEnvName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// checkCodeEnv accepts env_vars whose names a shell can take and whose
// values an environment can hold.
func checkCodeEnv(env map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if !codeEnvName.MatchString(k) {
			return fmt.Errorf("env_vars: %q is not a variable name (letters, digits and '_', not first a digit)", k)
		}
		if strings.ContainsRune(env[k], 0) {
			return fmt.Errorf("env_vars: the value of %s holds a NUL byte", k)
		}
	}
	return nil
}

const (
	// Python: the values replaced are kept in the user's namespace until
	// the restoring cell, which removes every name it and the setup made.
	pythonEnvSetup   = `_hutch_environ = __import__("os").environ; _hutch_env_saved = {k: _hutch_environ.get(k) for k in %s}; _hutch_environ.update(%s); del _hutch_environ`
	pythonEnvRestore = `def _hutch_restore_env(environ=__import__("os").environ):
    for k, v in globals().pop("_hutch_env_saved", {}).items():
        if v is None:
            environ.pop(k, None)
        else:
            environ[k] = v
_hutch_restore_env()
del _hutch_restore_env`

	// JavaScript and TypeScript run on Deno's kernel, whose process.env
	// is Deno.env.
	denoEnvSetup   = `globalThis._hutchEnvSaved = Object.fromEntries(%s.map((k) => [k, Deno.env.get(k)])); for (const [k, v] of Object.entries(%s)) Deno.env.set(k, v);`
	denoEnvRestore = `for (const [k, v] of Object.entries(globalThis._hutchEnvSaved ?? {})) { if (v === undefined) Deno.env.delete(k); else Deno.env.set(k, v); }
delete globalThis._hutchEnvSaved;`
)

// codeEnvCells returns code, a cell of language, with env set at its
// start, and the cell that puts back what that replaced.
func codeEnvCells(language string, env map[string]string, code string) (cell, restore string, err error) {
	names := slices.Sorted(maps.Keys(env))
	quotedNames, _ := json.Marshal(names) // strings only: cannot fail
	values, _ := json.Marshal(env)
	switch language {
	case "python":
		// Indented as the cell's first line, which IPython dedents the
		// cell by.
		return firstIndent(code) + fmt.Sprintf(pythonEnvSetup, quotedNames, values) + "\n" + code, pythonEnvRestore, nil
	case "javascript", "typescript":
		return fmt.Sprintf(denoEnvSetup, quotedNames, values) + "\n" + code, denoEnvRestore, nil
	case "bash":
		// A cell runs inside a function: plain assignments are global.
		var set, put strings.Builder
		for _, k := range names {
			saved := "__hutch_env_" + k
			fmt.Fprintf(&set, "%s=${%s+x$%s}; export %s=%s; ", saved, k, k, k, shellQuote(env[k]))
			fmt.Fprintf(&put, "if [ -n \"$%s\" ]; then export %s=\"${%s#x}\"; else unset %s; fi; unset %s\n", saved, k, saved, k, saved)
		}
		return strings.TrimSuffix(set.String(), " ") + "\n" + code, put.String(), nil
	}
	return "", "", fmt.Errorf("env_vars are not supported in %s contexts", language)
}

// firstIndent is the indentation of code's first line that is not blank.
func firstIndent(code string) string {
	for line := range strings.Lines(code) {
		if strings.TrimSpace(line) != "" {
			return line[:len(line)-len(strings.TrimLeft(line, " \t"))]
		}
	}
	return ""
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
