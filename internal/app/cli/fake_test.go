package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
)

const (
	fakeKey       = "testkey"
	fakeWorkspace = "/home/user/workspace"
)

// fakeDaemon is an in-memory daemon speaking the REST API, enough for the
// CLI: sandboxes, a handful of scripted commands and a file tree.
//
// Commands (cmd[0]): echo ARGS (stdout), warn ARGS (stderr), exit N,
// cat (stdin to stdout), env K, pwd (cwd and user), timeout, kill,
// block (prints "started" then waits for the client to go away),
// broken (an error event mid-stream).
type fakeDaemon struct {
	srv *httptest.Server

	mu        sync.Mutex
	nextID    int
	sandboxes map[string]*client.Sandbox
	env       map[string]map[string]string
	files     map[string]map[string]*fakeFile // sandbox → absolute path → file
	created   []client.CreateSandboxRequest
	execs     []client.ExecRequest
	ptys      []url.Values // the queries of terminal sessions
	deleted   []string
}

type fakeFile struct {
	dir  bool
	data []byte
	mode string
}

func newFakeDaemon(t *testing.T) *fakeDaemon {
	t.Helper()
	f := &fakeDaemon{
		sandboxes: map[string]*client.Sandbox{},
		env:       map[string]map[string]string{},
		files:     map[string]map[string]*fakeFile{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/health", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, client.Health{Status: "ok", Version: "test"})
	})
	mux.HandleFunc("POST /v1/sandboxes", f.create)
	mux.HandleFunc("GET /v1/sandboxes", f.list)
	mux.HandleFunc("GET /v1/sandboxes/{id}", f.withSandbox(f.get))
	mux.HandleFunc("DELETE /v1/sandboxes/{id}", f.withSandbox(f.delete))
	mux.HandleFunc("GET /v1/sandboxes/{id}/activity", f.withSandbox(f.activity))
	mux.HandleFunc("POST /v1/sandboxes/{id}/exec", f.withSandbox(f.exec))
	mux.HandleFunc("GET /v1/sandboxes/{id}/pty", f.withSandbox(f.pty))
	mux.HandleFunc("GET /v1/sandboxes/{id}/files", f.withSandbox(f.readFile))
	mux.HandleFunc("PUT /v1/sandboxes/{id}/files", f.withSandbox(f.writeFile))
	mux.HandleFunc("DELETE /v1/sandboxes/{id}/files", f.withSandbox(f.deleteFile))
	mux.HandleFunc("GET /v1/sandboxes/{id}/files/stat", f.withSandbox(f.stat))
	mux.HandleFunc("GET /v1/sandboxes/{id}/files/list", f.withSandbox(f.listFiles))
	mux.HandleFunc("POST /v1/sandboxes/{id}/files/mkdir", f.withSandbox(f.mkdir))
	mux.HandleFunc("POST /v1/sandboxes/{id}/files/move", f.withSandbox(f.move))
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+fakeKey {
			writeError(w, 401, "unauthenticated", "missing or wrong API key")
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// result is what one hutch invocation did.
type result struct {
	stdout, stderr string
	code           int
}

// run runs hutch with args against the fake, stdin as its standard input.
func (f *fakeDaemon) run(ctx context.Context, stdin string, args ...string) result {
	var out, errOut bytes.Buffer
	return f.runWith(ctx, strings.NewReader(stdin), &out, &errOut, &out, &errOut, args...)
}

func (f *fakeDaemon) runWith(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer, outBuf, errBuf *bytes.Buffer, args ...string) result {
	a := &app{
		stdin:     stdin,
		stdout:    stdout,
		stderr:    stderr,
		lookupEnv: func(k string) (string, bool) { v, ok := map[string]string{"HOSTVAR": "from-host"}[k]; return v, ok },
		newClient: func() (*client.Client, error) { return client.New(f.srv.URL, fakeKey) },
		now:       func() time.Time { return fakeNow },
	}
	code := a.run(ctx, args)
	return result{outBuf.String(), errBuf.String(), code}
}

var fakeNow = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// addSandbox creates a sandbox directly, as if created earlier.
func (f *fakeDaemon) addSandbox(id string, created time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sandboxes[id] = &client.Sandbox{
		ID: id, Template: "host", Runtime: "runc", State: "running", CPUs: 1, MemoryMB: 512, Pids: 256,
		IdleTimeoutS: 300, Metadata: map[string]string{}, CreatedAt: created, UpdatedAt: created,
	}
	f.files[id] = map[string]*fakeFile{"/": {dir: true}, "/home": {dir: true}, "/home/user": {dir: true}, fakeWorkspace: {dir: true}}
}

// file returns a copy of a file's content and whether it exists.
func (f *fakeDaemon) file(id, p string) (*fakeFile, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ff, ok := f.files[id][p]
	if !ok {
		return nil, false
	}
	c := *ff
	c.data = bytes.Clone(ff.data)
	return &c, true
}

func (f *fakeDaemon) putFile(id, p, data, mode string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mkdirAllLocked(id, path.Dir(p))
	f.files[id][p] = &fakeFile{data: []byte(data), mode: mode}
}

// calls returns copies of the requests the fake has seen.
func (f *fakeDaemon) calls() (created []client.CreateSandboxRequest, execs []client.ExecRequest, deleted []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.created), slices.Clone(f.execs), slices.Clone(f.deleted)
}

func (f *fakeDaemon) sandboxIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	for id := range f.sandboxes {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

func (f *fakeDaemon) withSandbox(h func(w http.ResponseWriter, r *http.Request, id string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		f.mu.Lock()
		_, ok := f.sandboxes[id]
		f.mu.Unlock()
		if !ok {
			writeError(w, 404, "not_found", fmt.Sprintf("sandbox %s not found", id))
			return
		}
		h(w, r, id)
	}
}

func (f *fakeDaemon) create(w http.ResponseWriter, r *http.Request) {
	var req client.CreateSandboxRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, 400, "invalid_argument", err.Error())
		return
	}
	f.mu.Lock()
	f.nextID++
	id := fmt.Sprintf("sb-%d", f.nextID)
	f.created = append(f.created, req)
	f.mu.Unlock()
	f.addSandbox(id, fakeNow)
	f.mu.Lock()
	defer f.mu.Unlock()
	sb := f.sandboxes[id]
	if req.Template != "" {
		sb.Template = req.Template
	}
	if req.Metadata != nil {
		sb.Metadata = req.Metadata
	}
	f.env[id] = req.Env
	writeJSON(w, 201, sb)
}

func (f *fakeDaemon) list(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := []*client.Sandbox{}
	for _, sb := range f.sandboxes {
		out = append(out, sb)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	writeJSON(w, 200, map[string]any{"sandboxes": out})
}

func (f *fakeDaemon) get(w http.ResponseWriter, r *http.Request, id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	writeJSON(w, 200, f.sandboxes[id])
}

func (f *fakeDaemon) activity(w http.ResponseWriter, r *http.Request, id string) {
	at := fakeNow.Add(5 * time.Minute)
	writeJSON(w, 200, client.Activity{
		State: "running", Reasons: []string{"idle for 0s: no command, background process or CPU use"},
		LastActivityAt: fakeNow, IdleTimeoutS: 300, IdleAction: "suspend", ActionAt: &at,
	})
}

func (f *fakeDaemon) delete(w http.ResponseWriter, r *http.Request, id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.sandboxes, id)
	delete(f.files, id)
	f.deleted = append(f.deleted, id)
	w.WriteHeader(204)
}

func (f *fakeDaemon) exec(w http.ResponseWriter, r *http.Request, id string) {
	var req client.ExecRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Cmd) == 0 {
		writeError(w, 400, "invalid_argument", "cmd is required")
		return
	}
	f.mu.Lock()
	f.execs = append(f.execs, req)
	sandboxEnv := f.env[id]
	f.mu.Unlock()

	var res client.ExecResult
	stream := r.Header.Get("Accept") == "text/event-stream"
	emit := func(name string, v any) {
		b, _ := json.Marshal(v)
		_, _ = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
		w.(http.Flusher).Flush()
	}
	output := func(s, text string) {
		if stream {
			emit(s, map[string]string{"data": text})
		} else if s == "stdout" {
			res.Stdout += text
		} else {
			res.Stderr += text
		}
	}
	if stream {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
	}
	args := req.Cmd[1:]
	switch req.Cmd[0] {
	case "echo":
		output("stdout", strings.Join(args, " ")+"\n")
	case "warn":
		output("stderr", strings.Join(args, " ")+"\n")
	case "exit":
		res.ExitCode, _ = strconv.Atoi(args[0])
	case "cat":
		output("stdout", req.Stdin)
	case "env":
		v, ok := req.Env[args[0]]
		if !ok {
			v = sandboxEnv[args[0]]
		}
		output("stdout", v+"\n")
	case "pwd":
		output("stdout", req.Cwd+" "+req.User+"\n")
	case "timeout":
		res.ExitCode, res.TimedOut, res.KilledBy, res.DurationMS = 137, true, "timeout", 180_000
	case "kill":
		res.ExitCode, res.KilledBy = 128+9, "signal"
	case "block":
		output("stdout", "started\n")
		<-r.Context().Done()
		return
	case "broken":
		output("stdout", "partial\n")
		if stream {
			emit("error", map[string]any{"error": map[string]string{"code": "unavailable", "message": "agent went away"}})
			return
		}
		writeError(w, 503, "unavailable", "agent went away")
		return
	default:
		res.ExitCode = 127
		output("stderr", req.Cmd[0]+": not found\n")
	}
	if stream {
		emit("exit", client.ExecExit{ExitCode: res.ExitCode, DurationMS: res.DurationMS, TimedOut: res.TimedOut, KilledBy: res.KilledBy})
		return
	}
	writeJSON(w, 200, res)
}

// resolve makes a request's path absolute, as the daemon does.
func resolve(p string) string {
	if !path.IsAbs(p) {
		p = path.Join(fakeWorkspace, p)
	}
	return path.Clean(p)
}

func (f *fakeDaemon) entryLocked(id, p string) client.FileEntry {
	ff := f.files[id][p]
	e := client.FileEntry{
		Name: path.Base(p), Path: p, Type: "file", Size: int64(len(ff.data)), Mode: ff.mode,
		Owner: "user", Group: "user", ModifiedAt: fakeNow,
	}
	if e.Mode == "" {
		e.Mode = "0644"
	}
	if ff.dir {
		e.Type, e.Size, e.Mode = "dir", 4096, "0755"
	}
	return e
}

func (f *fakeDaemon) mkdirAllLocked(id, p string) {
	for d := p; ; d = path.Dir(d) {
		if _, ok := f.files[id][d]; !ok {
			f.files[id][d] = &fakeFile{dir: true}
		}
		if d == "/" {
			return
		}
	}
}

func (f *fakeDaemon) readFile(w http.ResponseWriter, r *http.Request, id string) {
	p := resolve(r.URL.Query().Get("path"))
	f.mu.Lock()
	ff, ok := f.files[id][p]
	f.mu.Unlock()
	switch {
	case !ok:
		writeError(w, 404, "not_found", "no such file: "+p)
	case ff.dir:
		writeError(w, 400, "invalid_argument", p+" is a directory")
	default:
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(ff.data)
	}
}

func (f *fakeDaemon) writeFile(w http.ResponseWriter, r *http.Request, id string) {
	p := resolve(r.URL.Query().Get("path"))
	data, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, 400, "invalid_argument", err.Error())
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if ff, ok := f.files[id][p]; ok && ff.dir {
		writeError(w, 400, "invalid_argument", p+" is a directory")
		return
	}
	f.mkdirAllLocked(id, path.Dir(p))
	f.files[id][p] = &fakeFile{data: data}
	writeJSON(w, 200, f.entryLocked(id, p))
}

func (f *fakeDaemon) deleteFile(w http.ResponseWriter, r *http.Request, id string) {
	p := resolve(r.URL.Query().Get("path"))
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.files[id][p]; !ok {
		writeError(w, 404, "not_found", "no such file: "+p)
		return
	}
	for k := range f.files[id] {
		if k == p || strings.HasPrefix(k, p+"/") {
			delete(f.files[id], k)
		}
	}
	w.WriteHeader(204)
}

func (f *fakeDaemon) stat(w http.ResponseWriter, r *http.Request, id string) {
	p := resolve(r.URL.Query().Get("path"))
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.files[id][p]; !ok {
		writeError(w, 404, "not_found", "no such file: "+p)
		return
	}
	writeJSON(w, 200, f.entryLocked(id, p))
}

func (f *fakeDaemon) listFiles(w http.ResponseWriter, r *http.Request, id string) {
	p := resolve(r.URL.Query().Get("path"))
	depth := 1
	if d := r.URL.Query().Get("depth"); d != "" {
		depth, _ = strconv.Atoi(d)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if ff, ok := f.files[id][p]; !ok || !ff.dir {
		writeError(w, 400, "invalid_argument", p+" is not a directory")
		return
	}
	entries := []client.FileEntry{}
	prefix := strings.TrimSuffix(p, "/") + "/"
	for k := range f.files[id] {
		if rest, ok := strings.CutPrefix(k, prefix); ok && rest != "" && strings.Count(rest, "/") < depth {
			entries = append(entries, f.entryLocked(id, k))
		}
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Path < entries[j].Path })
	writeJSON(w, 200, map[string]any{"entries": entries})
}

func (f *fakeDaemon) mkdir(w http.ResponseWriter, r *http.Request, id string) {
	var req struct{ Path string }
	_ = json.NewDecoder(r.Body).Decode(&req)
	p := resolve(req.Path)
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.files[id][p]; ok {
		writeError(w, 409, "already_exists", p+" already exists")
		return
	}
	f.mkdirAllLocked(id, p)
	writeJSON(w, 201, f.entryLocked(id, p))
}

func (f *fakeDaemon) move(w http.ResponseWriter, r *http.Request, id string) {
	var req struct{ Source, Destination string }
	_ = json.NewDecoder(r.Body).Decode(&req)
	src, dst := resolve(req.Source), resolve(req.Destination)
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.files[id][src]; !ok {
		writeError(w, 404, "not_found", "no such file: "+src)
		return
	}
	f.mkdirAllLocked(id, path.Dir(dst))
	for k, v := range f.files[id] {
		if k == src || strings.HasPrefix(k, src+"/") {
			delete(f.files[id], k)
			f.files[id][dst+strings.TrimPrefix(k, src)] = v
		}
	}
	writeJSON(w, 200, f.entryLocked(id, dst))
}
