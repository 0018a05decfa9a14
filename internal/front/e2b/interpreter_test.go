package e2b

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	osexec "os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/base/redact"
	"github.com/hutchdev/hutch/internal/core/exec"
)

const codeSandbox = "sbx-1"

// fakeCodeContexts keeps contexts as the agent does; run, when set, is
// what code in them does.
type fakeCodeContexts struct {
	run func(ctx context.Context, req exec.ContextCode, fn func(exec.CodeEvent) error) (exec.CodeEnd, error)

	mu       sync.Mutex
	contexts []exec.Context
	created  []exec.ContextRequest
	runs     []exec.ContextCode
}

func (f *fakeCodeContexts) CreateContext(_ context.Context, id string, req exec.ContextRequest) (exec.Context, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if id != codeSandbox {
		return exec.Context{}, errdefs.NotFound("sandbox %s", id)
	}
	f.created = append(f.created, req)
	if i := slices.IndexFunc(f.contexts, func(c exec.Context) bool { return c.ID == req.ID }); req.ID != "" && i >= 0 {
		return f.contexts[i], nil
	}
	if req.Language != "python" && req.Language != "javascript" && req.Language != "typescript" && req.Language != "bash" {
		return exec.Context{}, errdefs.InvalidArgument("a context's language must be one of bash, javascript, python, typescript, got %q", req.Language)
	}
	c := exec.Context{ID: req.ID, Language: req.Language, Cwd: req.Cwd, User: "user"}
	if c.ID == "" {
		c.ID = fmt.Sprintf("ctx-%d", len(f.contexts)+1)
	}
	f.contexts = append(f.contexts, c)
	return c, nil
}

func (f *fakeCodeContexts) Contexts(context.Context, string) ([]exec.Context, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.contexts), nil
}

func (f *fakeCodeContexts) find(contextID string) (exec.Context, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := slices.IndexFunc(f.contexts, func(c exec.Context) bool { return c.ID == contextID })
	if i < 0 {
		return exec.Context{}, errdefs.NotFound("code context %q not found", contextID)
	}
	return f.contexts[i], nil
}

func (f *fakeCodeContexts) RestartContext(_ context.Context, _, contextID string) (exec.Context, error) {
	return f.find(contextID)
}

func (f *fakeCodeContexts) DeleteContext(_ context.Context, _, contextID string) error {
	if _, err := f.find(contextID); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.contexts = slices.DeleteFunc(f.contexts, func(c exec.Context) bool { return c.ID == contextID })
	return nil
}

func (f *fakeCodeContexts) RunInContext(ctx context.Context, _ string, req exec.ContextCode, fn func(exec.CodeEvent) error) (exec.CodeEnd, error) {
	if _, err := f.find(req.ContextID); err != nil {
		return exec.CodeEnd{}, err
	}
	f.mu.Lock()
	f.runs = append(f.runs, req)
	n := len(f.runs)
	f.mu.Unlock()
	if f.run == nil {
		return exec.CodeEnd{ExecutionCount: n}, nil
	}
	return f.run(ctx, req, fn)
}

// emit returns a run that gives events and ends with end.
func emit(end exec.CodeEnd, err error, events ...exec.CodeEvent) func(context.Context, exec.ContextCode, func(exec.CodeEvent) error) (exec.CodeEnd, error) {
	return func(_ context.Context, _ exec.ContextCode, fn func(exec.CodeEvent) error) (exec.CodeEnd, error) {
		for _, ev := range events {
			if err := fn(ev); err != nil {
				return exec.CodeEnd{}, err
			}
		}
		return end, err
	}
}

func serveCode(t *testing.T, in *Interpreter, method, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequestWithContext(t.Context(), method, path, strings.NewReader(body))
	w := httptest.NewRecorder()
	in.ServeSandbox(w, r, codeSandbox)
	return w
}

var codeTimestamp = regexp.MustCompile(`"timestamp":"([^"]*)"`)

// codeLinesOf splits an execution's answer into its lines, each
// timestamp checked and replaced by "T".
func codeLinesOf(t *testing.T, body string) []string {
	t.Helper()
	if !strings.HasSuffix(body, "\n") {
		t.Errorf("the answer does not end with a newline: %q", body)
	}
	lines := strings.Split(strings.TrimSuffix(body, "\n"), "\n")
	for i, line := range lines {
		if !json.Valid([]byte(line)) {
			t.Errorf("line %d is not JSON: %s", i, line)
		}
		for _, m := range codeTimestamp.FindAllStringSubmatch(line, -1) {
			if _, err := time.Parse(time.RFC3339Nano, m[1]); err != nil || !strings.HasSuffix(m[1], "Z") {
				t.Errorf("line %d: timestamp %q is not ISO 8601 in UTC", i, m[1])
			}
		}
		lines[i] = codeTimestamp.ReplaceAllString(line, `"timestamp":"T"`)
	}
	return lines
}

func checkLines(t *testing.T, w *httptest.ResponseRecorder, want ...string) {
	t.Helper()
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("status %d, Content-Type %q: %s", w.Code, w.Header().Get("Content-Type"), w.Body)
	}
	got := codeLinesOf(t, w.Body.String())
	if !slices.Equal(got, want) {
		t.Errorf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func checkText(t *testing.T, w *httptest.ResponseRecorder, status int, text string) {
	t.Helper()
	if w.Code != status || w.Body.String() != text || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
		t.Errorf("got %d %q (%s), want %d %q as plain text", w.Code, w.Body, w.Header().Get("Content-Type"), status, text)
	}
}

func raw(s string) json.RawMessage { return json.RawMessage(s) }

func TestInterpreterExecuteLines(t *testing.T) {
	tests := []struct {
		name   string
		events []exec.CodeEvent
		end    exec.CodeEnd
		err    error
		want   []string
	}{{
		name:   "a statement",
		end:    exec.CodeEnd{ExecutionCount: 1},
		events: nil,
		want:   []string{`{"type":"number_of_executions","execution_count":1}`, `{"type":"end_of_execution"}`},
	}, {
		name: "output and the cell's value",
		end:  exec.CodeEnd{ExecutionCount: 2},
		events: []exec.CodeEvent{
			{Stdout: "hi\n"}, {Stderr: "careful\n"}, {Stdout: "é ü\n"},
			{Result: &exec.CodeResult{Main: true, Data: map[string]json.RawMessage{"text/plain": raw(`"2"`)}}},
		},
		want: []string{
			`{"type":"stdout","text":"hi\n","timestamp":"T"}`,
			`{"type":"stderr","text":"careful\n","timestamp":"T"}`,
			`{"type":"stdout","text":"é ü\n","timestamp":"T"}`,
			`{"type":"result","text":"2","is_main_result":true}`,
			`{"type":"number_of_executions","execution_count":2}`,
			`{"type":"end_of_execution"}`,
		},
	}, {
		name: "a string's repr loses its quotes",
		end:  exec.CodeEnd{ExecutionCount: 3},
		events: []exec.CodeEvent{
			{Result: &exec.CodeResult{Main: true, Data: map[string]json.RawMessage{"text/plain": raw(`"'abc'"`)}}},
		},
		want: []string{
			`{"type":"result","text":"abc","is_main_result":true}`,
			`{"type":"number_of_executions","execution_count":3}`,
			`{"type":"end_of_execution"}`,
		},
	}, {
		name: "a figure shown, with every MIME type E2B names",
		end:  exec.CodeEnd{ExecutionCount: 4},
		events: []exec.CodeEvent{{Result: &exec.CodeResult{Data: map[string]json.RawMessage{
			"text/plain":                raw(`"<Figure size 640x480 with 1 Axes>"`),
			"image/png":                 raw(`"iVBORw0KGgo="`),
			"e2b/chart":                 raw(`{"type": "line", "title": "t", "elements": []}`),
			"text/html":                 raw(`"<b>x</b>"`),
			"text/markdown":             raw(`"# x"`),
			"image/svg+xml":             raw(`"<svg/>"`),
			"image/jpeg":                raw(`"/9j/"`),
			"application/pdf":           raw(`"JVBE"`),
			"text/latex":                raw(`"$x$"`),
			"application/json":          raw(`{"a":1}`),
			"application/javascript":    raw(`"alert(1)"`),
			"e2b/data":                  raw(`{"a":[1,2]}`),
			"application/vnd.hutch+txt": raw(`"other"`),
			"text/csv":                  raw(`null`),
		}}}},
		want: []string{
			`{"type":"result","text":"<Figure size 640x480 with 1 Axes>","html":"<b>x</b>","markdown":"# x","svg":"<svg/>","png":"iVBORw0KGgo=","jpeg":"/9j/","pdf":"JVBE","latex":"$x$","json":{"a":1},"javascript":"alert(1)","data":{"a":[1,2]},"chart":{"type":"line","title":"t","elements":[]},"extra":{"application/vnd.hutch+txt":"other"},"is_main_result":false}`,
			`{"type":"number_of_executions","execution_count":4}`,
			`{"type":"end_of_execution"}`,
		},
	}, {
		name: "an error, its traceback joined",
		end:  exec.CodeEnd{ExecutionCount: 5},
		events: []exec.CodeEvent{
			{Error: &exec.CodeError{Name: "ZeroDivisionError", Value: "division by zero", Traceback: []string{"Traceback:\n", "  1/0\n", "ZeroDivisionError: division by zero"}}},
		},
		want: []string{
			`{"type":"error","name":"ZeroDivisionError","value":"division by zero","traceback":"Traceback:\n  1/0\nZeroDivisionError: division by zero"}`,
			`{"type":"number_of_executions","execution_count":5}`,
			`{"type":"end_of_execution"}`,
		},
	}, {
		name:   "the timeout",
		end:    exec.CodeEnd{TimedOut: true, Restarted: true},
		events: []exec.CodeEvent{{Stdout: "working"}},
		want: []string{
			`{"type":"stdout","text":"working","timestamp":"T"}`,
			`{"type":"error","name":"TimeoutError","value":"the execution ran past 30m0s and was interrupted","traceback":""}`,
			`{"type":"end_of_execution"}`,
		},
	}, {
		name:   "the timeout, the kernel's own error told",
		end:    exec.CodeEnd{TimedOut: true, ExecutionCount: 6},
		events: []exec.CodeEvent{{Error: &exec.CodeError{Name: "KeyboardInterrupt"}}},
		want: []string{
			`{"type":"error","name":"KeyboardInterrupt","value":"","traceback":""}`,
			`{"type":"number_of_executions","execution_count":6}`,
			`{"type":"end_of_execution"}`,
		},
	}, {
		name:   "the call fails midway",
		err:    errors.New("agent: connection reset"),
		events: []exec.CodeEvent{{Stdout: "partial"}},
		want: []string{
			`{"type":"stdout","text":"partial","timestamp":"T"}`,
			`{"type":"error","name":"UnexpectedEndOfExecution","value":"internal error; the daemon's log has the details","traceback":""}`,
			`{"type":"end_of_execution"}`,
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeCodeContexts{run: emit(tt.end, tt.err, tt.events...)}
			w := serveCode(t, NewInterpreter(f, nil, nil), http.MethodPost, "/execute", `{"code":"x"}`)
			checkLines(t, w, tt.want...)
			if len(f.runs) != 1 || f.runs[0].Code != "x" || f.runs[0].Timeout != exec.MaxCodeTimeout {
				t.Errorf("runs: %+v", f.runs)
			}
		})
	}
}

func TestInterpreterExecuteContext(t *testing.T) {
	tests := []struct {
		name, body string
		wantID     string // the context it ran in
		wantLang   string // the language of the default context made, if one was
	}{
		{"no language", `{"code":"1"}`, "default-python", "python"},
		{"null fields", `{"code":"1","context_id":null,"language":null,"env_vars":null}`, "default-python", "python"},
		{"python", `{"code":"1","language":"Python"}`, "default-python", "python"},
		{"js", `{"code":"1","language":"js"}`, "default-javascript", "javascript"},
		{"ts", `{"code":"1","language":"ts"}`, "default-typescript", "typescript"},
		{"bash", `{"code":"1","language":"bash"}`, "default-bash", "bash"},
		{"a context", `{"code":"1","context_id":"mine"}`, "mine", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeCodeContexts{contexts: []exec.Context{{ID: "mine", Language: "python", Cwd: "/home/user"}}}
			w := serveCode(t, NewInterpreter(f, nil, nil), http.MethodPost, "/execute", tt.body)
			checkLines(t, w, `{"type":"number_of_executions","execution_count":1}`, `{"type":"end_of_execution"}`)
			if len(f.runs) != 1 || f.runs[0].ContextID != tt.wantID {
				t.Errorf("runs: %+v, want one in %s", f.runs, tt.wantID)
			}
			switch {
			case tt.wantLang == "" && len(f.created) > 0:
				t.Errorf("created %+v", f.created)
			case tt.wantLang != "" && (len(f.created) != 1 || f.created[0].Language != tt.wantLang || f.created[0].Cwd != "/home/user" || f.created[0].ID != tt.wantID):
				t.Errorf("created %+v", f.created)
			}
		})
	}

	// The default context is made once, then reused.
	f := &fakeCodeContexts{}
	in := NewInterpreter(f, nil, nil)
	for range 2 {
		serveCode(t, in, http.MethodPost, "/execute", `{"code":"1"}`)
	}
	if len(f.contexts) != 1 || len(f.runs) != 2 || f.runs[1].ContextID != "default-python" {
		t.Errorf("contexts %+v, runs %+v", f.contexts, f.runs)
	}
}

func TestInterpreterExecuteRefused(t *testing.T) {
	tests := []struct {
		name, body string
		status     int
		text       string
	}{
		{"context and language", `{"code":"1","context_id":"c","language":"python"}`, 400, "give context_id or language, not both"},
		{"an unknown context", `{"code":"1","context_id":"nope"}`, 404, "Context nope not found"},
		{"an unknown language", `{"code":"1","language":"cobol"}`, 400, `a context's language must be one of bash, javascript, python, typescript, got "cobol"`},
		{"not JSON", `{"code":`, 400, "the body is not the JSON object expected: unexpected EOF"},
		{"no body", ``, 400, "the body is empty: a JSON object is expected"},
		{"a bad variable name", `{"code":"1","env_vars":{"A-B":"1"}}`, 400, `env_vars: "A-B" is not a variable name (letters, digits and '_', not first a digit)`},
		{"a NUL in a value", `{"code":"1","env_vars":{"A":"x\u0000y"}}`, 400, "env_vars: the value of A holds a NUL byte"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeCodeContexts{}
			checkText(t, serveCode(t, NewInterpreter(f, nil, nil), http.MethodPost, "/execute", tt.body), tt.status, tt.text)
			if len(f.runs) > 0 {
				t.Errorf("ran %+v", f.runs)
			}
		})
	}
}

func TestInterpreterKeepalive(t *testing.T) {
	f := &fakeCodeContexts{run: func(ctx context.Context, _ exec.ContextCode, fn func(exec.CodeEvent) error) (exec.CodeEnd, error) {
		time.Sleep(150 * time.Millisecond)
		if err := fn(exec.CodeEvent{Stdout: "done"}); err != nil {
			return exec.CodeEnd{}, err
		}
		return exec.CodeEnd{ExecutionCount: 1}, nil
	}}
	in := NewInterpreter(f, nil, nil)
	in.keepalive = 20 * time.Millisecond
	w := serveCode(t, in, http.MethodPost, "/execute", `{"code":"sleep"}`)
	lines := codeLinesOf(t, w.Body.String())
	i := slices.Index(lines, `{"type":"stdout","text":"done","timestamp":"T"}`)
	if i < 2 || slices.ContainsFunc(lines[:i], func(l string) bool { return l != `{"type":"keepalive"}` }) {
		t.Errorf("want keepalives while the code is silent, then its output: %q", lines)
	}
	if want := []string{`{"type":"number_of_executions","execution_count":1}`, `{"type":"end_of_execution"}`}; !slices.Equal(lines[len(lines)-2:], want) {
		t.Errorf("the last lines: %q", lines[len(lines)-2:])
	}
}

// The lines go out as they come, and a client that goes away interrupts
// the code: RunInContext's ctx ends.
func TestInterpreterStreamsAndInterrupts(t *testing.T) {
	interrupted := make(chan struct{})
	f := &fakeCodeContexts{run: func(ctx context.Context, _ exec.ContextCode, fn func(exec.CodeEvent) error) (exec.CodeEnd, error) {
		if err := fn(exec.CodeEvent{Stdout: "started\n"}); err != nil {
			return exec.CodeEnd{}, err
		}
		<-ctx.Done()
		close(interrupted)
		return exec.CodeEnd{}, ctx.Err()
	}}
	in := NewInterpreter(f, nil, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { in.ServeSandbox(w, r, codeSandbox) }))
	defer srv.Close()

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/execute", strings.NewReader(`{"code":"while True: pass"}`))
	if err != nil {
		t.Fatal(err)
	}
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	line, err := bufio.NewReader(res.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, `{"type":"stdout","text":"started\n"`) {
		t.Fatalf("first line %q, %v", line, err)
	}
	cancel()
	select {
	case <-interrupted:
	case <-time.After(5 * time.Second):
		t.Fatal("the code was not interrupted when the client went away")
	}
}

func TestInterpreterRedacts(t *testing.T) {
	const secret = "sk-live-0123456789abcdef"
	var r redact.Redactor
	r.Replace([]redact.Secret{{Name: "OPENAI_API_KEY", Value: secret}})
	f := &fakeCodeContexts{
		contexts: []exec.Context{{ID: "c", Language: "python", Cwd: "/home/user/" + secret}},
		run: emit(exec.CodeEnd{ExecutionCount: 1}, nil,
			exec.CodeEvent{Stdout: "key=" + secret[:10]}, // cut between two chunks
			exec.CodeEvent{Stdout: secret[10:] + "\n"},
			exec.CodeEvent{Stderr: "é" + secret + "é"},
			exec.CodeEvent{Result: &exec.CodeResult{Main: true, Data: map[string]json.RawMessage{"text/plain": raw(`"'` + secret + `'"`)}}},
			exec.CodeEvent{Error: &exec.CodeError{Name: "KeyError", Value: secret, Traceback: []string{secret}}},
		),
	}
	in := NewInterpreter(f, &r, nil)
	w := serveCode(t, in, http.MethodPost, "/execute", `{"code":"print(key)","context_id":"c"}`)
	checkLines(t, w,
		`{"type":"stdout","text":"key=","timestamp":"T"}`, // the rest held back: it may start the secret
		`{"type":"stdout","text":"[redacted:OPENAI_API_KEY]\n","timestamp":"T"}`,
		`{"type":"stderr","text":"é[redacted:OPENAI_API_KEY]é","timestamp":"T"}`,
		`{"type":"result","text":"[redacted:OPENAI_API_KEY]","is_main_result":true}`,
		`{"type":"error","name":"KeyError","value":"[redacted:OPENAI_API_KEY]","traceback":"[redacted:OPENAI_API_KEY]"}`,
		`{"type":"number_of_executions","execution_count":1}`,
		`{"type":"end_of_execution"}`,
	)
	for _, call := range []struct{ method, path, body string }{
		{http.MethodGet, "/contexts", ""},
		{http.MethodPost, "/execute", `{"code":"1","context_id":"` + secret + `"}`},
		{http.MethodPost, "/contexts/" + secret + "/restart", ""},
	} {
		w := serveCode(t, in, call.method, call.path, call.body)
		if strings.Contains(w.Body.String(), secret) || !strings.Contains(w.Body.String(), "[redacted:OPENAI_API_KEY]") {
			t.Errorf("%s %s: %s", call.method, call.path, w.Body)
		}
	}
}

func TestInterpreterContexts(t *testing.T) {
	f := &fakeCodeContexts{}
	in := NewInterpreter(f, nil, nil)

	w := serveCode(t, in, http.MethodGet, "/contexts", "")
	if w.Code != http.StatusOK || w.Body.String() != `[]` {
		t.Errorf("no contexts: %d %s", w.Code, w.Body)
	}
	w = serveCode(t, in, http.MethodPost, "/contexts", `{}`)
	if w.Code != http.StatusOK || w.Body.String() != `{"id":"ctx-1","language":"python","cwd":"/home/user"}` {
		t.Errorf("create: %d %s", w.Code, w.Body)
	}
	w = serveCode(t, in, http.MethodPost, "/contexts", `{"language":"js","cwd":"proj"}`)
	if w.Code != http.StatusOK || w.Body.String() != `{"id":"ctx-2","language":"javascript","cwd":"/home/user/proj"}` {
		t.Errorf("create js: %d %s", w.Code, w.Body)
	}
	w = serveCode(t, in, http.MethodPost, "/contexts", `{"language":"r","cwd":"/srv"}`)
	checkText(t, w, 400, `a context's language must be one of bash, javascript, python, typescript, got "r"`)
	w = serveCode(t, in, http.MethodGet, "/contexts", "")
	if w.Code != http.StatusOK || w.Body.String() != `[{"id":"ctx-1","language":"python","cwd":"/home/user"},{"id":"ctx-2","language":"javascript","cwd":"/home/user/proj"}]` {
		t.Errorf("list: %d %s", w.Code, w.Body)
	}
	if w.Header().Get("Content-Type") != "application/json" {
		t.Errorf("list: Content-Type %q", w.Header().Get("Content-Type"))
	}

	w = serveCode(t, in, http.MethodPost, "/contexts/ctx-1/restart", "")
	if w.Code != http.StatusOK || w.Body.String() != "null" {
		t.Errorf("restart: %d %s", w.Code, w.Body)
	}
	checkText(t, serveCode(t, in, http.MethodPost, "/contexts/nope/restart", ""), 404, "Context nope not found")
	w = serveCode(t, in, http.MethodDelete, "/contexts/ctx-1", "")
	if w.Code != http.StatusOK || w.Body.String() != "null" {
		t.Errorf("delete: %d %s", w.Code, w.Body)
	}
	checkText(t, serveCode(t, in, http.MethodDelete, "/contexts/ctx-1", ""), 404, "Context ctx-1 not found")
	if len(f.contexts) != 1 || f.contexts[0].ID != "ctx-2" {
		t.Errorf("left: %+v", f.contexts)
	}

	checkText(t, serveCode(t, in, http.MethodGet, "/execute", ""), 405, "Method Not Allowed")
	checkText(t, serveCode(t, in, http.MethodPut, "/contexts", ""), 405, "Method Not Allowed")
	checkText(t, serveCode(t, in, http.MethodGet, "/contexts/ctx-2/restart", ""), 405, "Method Not Allowed")
	checkText(t, serveCode(t, in, http.MethodGet, "/kernels", ""), 404, "Not Found")
	if w := serveCode(t, in, http.MethodGet, "/health", ""); w.Code != http.StatusOK || w.Body.String() != `"OK"` {
		t.Errorf("health: %d %s", w.Code, w.Body)
	}
}

// env_vars: set by code at the start of the cell, put back by a cell
// after it, before the answer ends.
func TestInterpreterEnvVars(t *testing.T) {
	f := &fakeCodeContexts{contexts: []exec.Context{{ID: "sh", Language: "bash"}}}
	in := NewInterpreter(f, nil, nil)
	w := serveCode(t, in, http.MethodPost, "/execute", `{"code":"  print(1)","env_vars":{"B":"it's \"2\"\n","A":"1"}}`)
	checkLines(t, w, `{"type":"number_of_executions","execution_count":1}`, `{"type":"end_of_execution"}`)
	if len(f.runs) != 2 {
		t.Fatalf("runs: %+v", f.runs)
	}
	want := `  _hutch_environ = __import__("os").environ; _hutch_env_saved = {k: _hutch_environ.get(k) for k in ["A","B"]}; _hutch_environ.update({"A":"1","B":"it's \"2\"\n"}); del _hutch_environ` + "\n  print(1)"
	if f.runs[0].Code != want || f.runs[1].Code != pythonEnvRestore {
		t.Errorf("cells:\n%s\n---\n%s", f.runs[0].Code, f.runs[1].Code)
	}

	// The restoring cell runs even when the client has gone.
	f.runs = nil
	f.run = func(ctx context.Context, req exec.ContextCode, fn func(exec.CodeEvent) error) (exec.CodeEnd, error) {
		if req.Code == pythonEnvRestore {
			return exec.CodeEnd{}, ctx.Err()
		}
		return exec.CodeEnd{}, context.Canceled
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/execute", strings.NewReader(`{"code":"1","env_vars":{"A":"1"}}`))
	in.ServeSandbox(httptest.NewRecorder(), r, codeSandbox)
	if len(f.runs) != 2 || f.runs[1].Code != pythonEnvRestore {
		t.Errorf("after the client went: %+v", f.runs)
	}
}

// The cells env_vars make do what they say, in the languages at hand.
func TestCodeEnvCellsRun(t *testing.T) {
	env := map[string]string{"HUTCH_T_NEW": "it's \"new\"\n$HOME `x` \\", "HUTCH_T_OLD": "replaced"}
	t.Setenv("HUTCH_T_OLD", "old")
	t.Run("python", func(t *testing.T) {
		if _, err := osexec.LookPath("python3"); err != nil {
			t.Skip("no python3")
		}
		cell, restore, err := codeEnvCells("python", env, "print(repr(__import__('os').environ['HUTCH_T_NEW']), __import__('os').environ['HUTCH_T_OLD'])")
		if err != nil {
			t.Fatal(err)
		}
		script := fmt.Sprintf("exec(%s)\nexec(%s)\nimport os\nprint(os.environ.get('HUTCH_T_NEW'), os.environ['HUTCH_T_OLD'], sorted(k for k in globals() if 'hutch' in k))",
			pyString(cell), pyString(restore))
		out, err := osexec.Command("python3", "-c", script).CombinedOutput()
		if want := `'it\'s "new"\n$HOME ` + "`x`" + ` \\' replaced` + "\nNone old []\n"; err != nil || string(out) != want {
			t.Errorf("got %q, %v\nwant %q", out, err, want)
		}
	})
	t.Run("bash", func(t *testing.T) {
		cell, restore, err := codeEnvCells("bash", env, `printf '%s|%s\n' "$HUTCH_T_NEW" "$HUTCH_T_OLD"`)
		if err != nil {
			t.Fatal(err)
		}
		// As Hutch's bash contexts run cells: sourced inside a function.
		script := fmt.Sprintf("cell() { eval %s; }\ncell\ncell() { eval %s; }\ncell\necho \"${HUTCH_T_NEW-unset}|$HUTCH_T_OLD|$(compgen -v | grep -c __hutch)\"", shellQuote(cell), shellQuote(restore))
		out, err := osexec.Command("bash", "--noprofile", "--norc", "-c", script).CombinedOutput()
		if want := "it's \"new\"\n$HOME `x` \\|replaced\nunset|old|0\n"; err != nil || string(out) != want {
			t.Errorf("got %q, %v\nwant %q", out, err, want)
		}
	})
	if _, _, err := codeEnvCells("r", env, ""); err == nil {
		t.Error("an R cell: no error")
	}
}

// pyString is s as a Python string literal.
func pyString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestCutRune(t *testing.T) {
	for _, tt := range []struct{ in, whole, rest string }{
		{"", "", ""},
		{"abc", "abc", ""},
		{"aé", "aé", ""},
		{"a\xc3", "a", "\xc3"},
		{"a\xe2\x82", "a", "\xe2\x82"},
		{"a\xe2\x82\xac", "a€", ""},
		{"\xf0\x9f\x98", "", "\xf0\x9f\x98"},
	} {
		whole, rest := cutRune([]byte(tt.in))
		if string(whole) != tt.whole || string(rest) != tt.rest {
			t.Errorf("cutRune(%q) = %q, %q; want %q, %q", tt.in, whole, rest, tt.whole, tt.rest)
		}
	}
}
