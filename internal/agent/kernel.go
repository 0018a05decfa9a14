package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"connectrpc.com/connect"

	"github.com/hutchdev/hutch/internal/agent/agentpb/hutchagent"
	"github.com/hutchdev/hutch/internal/agent/agentpb/process"
)

// Code contexts: a kernel per context that keeps the state of the code run
// in it (variables, imports, the working directory) from one call to the
// next, as a notebook does. Python runs on Jupyter's ipykernel, JavaScript
// and TypeScript on Deno's built-in Jupyter kernel, both spoken to over
// ZeroMQ on the sandbox's loopback (kernel_jupyter.go); bash is a bash
// process fed cells on its stdin (kernel_bash.go). Kernels are commands of
// the process service like any other, under a tag of their own, run as the
// context's user.

const (
	// maxContexts bounds a sandbox's contexts: each is a kernel process.
	maxContexts = 16
	// kernelStartTimeout bounds a kernel's start: ipykernel imports for
	// seconds under gVisor.
	kernelStartTimeout = 60 * time.Second
	// interruptGrace is how long code may take to stop once interrupted at
	// its timeout before its kernel is restarted.
	interruptGrace = 3 * time.Second
	// kernelTailBytes is how much of a kernel's own output is kept, for
	// the error when it dies.
	kernelTailBytes = 4 << 10
)

// kernel is a context's running kernel.
type kernel interface {
	pid() uint32
	// execute runs one cell, sending its output as it comes, and returns
	// the cell's execution count. It returns when the cell is done, or
	// with an error when the kernel died or ctx ended.
	execute(ctx context.Context, code string, send func(*hutchagent.CodeEvent) error) (uint32, error)
	// interrupt stops the cell that runs, keeping the kernel's state.
	interrupt()
	// exited is closed when the kernel's process has ended.
	exited() <-chan struct{}
	// close kills the kernel and frees what it holds.
	close()
}

// kernelLanguages are the languages of contexts, by canonical name, and
// how each one's kernel starts.
var kernelLanguages = map[string]func(x *contexts, c *codeContext) (kernel, error){
	"python":     startIPyKernel,
	"javascript": startDenoKernel,
	"typescript": startDenoKernel,
	"bash":       startBashKernel,
}

// kernelNeeds says what a language's kernel needs, for the error of a
// sandbox that lacks it.
var kernelNeeds = map[string]string{
	"python":     "ipykernel (Debian's python3-ipykernel), which the python template has",
	"javascript": "deno, which every default template has",
	"typescript": "deno, which every default template has",
	"bash":       "bash",
}

// kernelAliases are other names of the languages.
var kernelAliases = map[string]string{
	"py": "python", "python3": "python", "js": "javascript", "deno": "javascript", "ts": "typescript", "sh": "bash",
}

// contextLanguage returns the canonical name of language.
func contextLanguage(language string) (string, error) {
	name := strings.ToLower(language)
	if alias, ok := kernelAliases[name]; ok {
		name = alias
	}
	if _, ok := kernelLanguages[name]; !ok {
		return "", connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("a context's language must be one of %s, got %q",
			strings.Join(slices.Sorted(maps.Keys(kernelLanguages)), ", "), language))
	}
	return name, nil
}

// contexts keeps the agent's code contexts.
type contexts struct {
	srv *server

	mu       sync.Mutex
	byID     map[string]*codeContext
	starting map[string]struct{} // ids being created
	closed   bool
}

// codeContext is one context: its settings and its current kernel.
type codeContext struct {
	id       string
	language string
	acct     account
	dir      string // the kernel's working directory
	env      map[string]string

	// turn is held by the call that runs code (one at a time, in order of
	// arrival as far as the channel is fair) and by a restart.
	turn chan struct{}

	mu     sync.Mutex
	k      kernel
	cells  uint32 // bash's execution count
	closed bool
}

func newContexts(srv *server) *contexts {
	return &contexts{srv: srv, byID: map[string]*codeContext{}, starting: map[string]struct{}{}}
}

// create starts a context, or returns the running one req.Id names.
func (x *contexts) create(req *hutchagent.CreateContextRequest) (*hutchagent.CodeContext, error) {
	lang, err := contextLanguage(req.GetLanguage())
	if err != nil {
		return nil, err
	}
	if err := checkEnv(req.GetEnv()); err != nil {
		return nil, err
	}
	acct, err := x.srv.lookupUser(req.GetUser())
	if err != nil {
		return nil, err
	}
	dir, err := resolvePath(req.GetCwd(), acct)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(dir); err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("working directory %s: %w", dir, unwrapPathError(err)))
	} else if !fi.IsDir() {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("working directory %s is not a directory", dir))
	}
	id := req.GetId()
	if id == "" {
		id = newContextID()
	} else if err := checkContextID(id); err != nil {
		return nil, err
	}
	if c, err := x.reserve(id, lang); c != nil || err != nil {
		return info(c), err
	}
	c := &codeContext{id: id, language: lang, acct: acct, dir: dir, env: maps.Clone(req.GetEnv()), turn: make(chan struct{}, 1)}
	k, err := kernelLanguages[lang](x, c)
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.starting, id)
	if err != nil {
		return nil, err
	}
	c.k = k
	if x.closed {
		k.close()
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("the agent is shutting down"))
	}
	x.byID[id] = c
	x.srv.log.Debug("started a code context", "context", id, "language", lang, logPID, k.pid())
	return info(c), nil
}

// reserve claims id for a context being created; it returns the running
// context id names instead, when there is one of lang.
func (x *contexts) reserve(id, lang string) (*codeContext, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if c, ok := x.byID[id]; ok {
		if c.language != lang {
			return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("context %s exists, with language %s", id, c.language))
		}
		return c, nil
	}
	if _, ok := x.starting[id]; ok {
		return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("context %s is being created", id))
	}
	if len(x.byID)+len(x.starting) >= maxContexts {
		return nil, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("the sandbox has %d code contexts, the most it may: delete one first", maxContexts))
	}
	x.starting[id] = struct{}{}
	return nil, nil
}

func (x *contexts) get(id string) (*codeContext, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	c, ok := x.byID[id]
	if !ok {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("code context %q not found", id))
	}
	return c, nil
}

func (x *contexts) list() []*hutchagent.CodeContext {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []*hutchagent.CodeContext
	for _, c := range x.byID {
		out = append(out, info(c))
	}
	slices.SortFunc(out, func(a, b *hutchagent.CodeContext) int { return strings.Compare(a.Id, b.Id) })
	return out
}

// restart kills the context's kernel (a call running in it ends, saying
// so) and starts another.
func (x *contexts) restart(ctx context.Context, id string) (*hutchagent.CodeContext, error) {
	c, err := x.get(id)
	if err != nil {
		return nil, err
	}
	c.kernel().close()
	select {
	case c.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, connect.NewError(connect.CodeCanceled, ctx.Err())
	}
	defer func() { <-c.turn }()
	if err := x.restartKernel(c); err != nil {
		return nil, err
	}
	return info(c), nil
}

// restartKernel replaces c's kernel with a new one; the caller holds c's
// turn.
func (x *contexts) restartKernel(c *codeContext) error {
	c.kernel().close()
	k, err := kernelLanguages[c.language](x, c)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		k.close()
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("code context %q was deleted", c.id))
	}
	c.k, c.cells = k, 0
	return nil
}

func (x *contexts) remove(id string) error {
	x.mu.Lock()
	c, ok := x.byID[id]
	delete(x.byID, id)
	x.mu.Unlock()
	if !ok {
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("code context %q not found", id))
	}
	c.close()
	return nil
}

// closeAll ends every context, at shutdown.
func (x *contexts) closeAll() {
	x.mu.Lock()
	x.closed = true
	all := slices.Collect(maps.Values(x.byID))
	clear(x.byID)
	x.mu.Unlock()
	for _, c := range all {
		c.close()
	}
}

func (c *codeContext) kernel() kernel {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.k
}

func (c *codeContext) close() {
	c.mu.Lock()
	c.closed = true
	k := c.k
	c.mu.Unlock()
	k.close()
}

func info(c *codeContext) *hutchagent.CodeContext {
	if c == nil {
		return nil
	}
	return &hutchagent.CodeContext{Id: c.id, Language: c.language, Cwd: c.dir, User: c.acct.Name, Pid: c.kernel().pid()}
}

func newContextID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// checkContextID accepts the ids a caller may give: short, and safe in
// tags and file names.
func checkContextID(id string) error {
	ok := len(id) <= 64
	for _, r := range id {
		ok = ok && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.')
	}
	if !ok {
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("a context id is up to 64 letters, digits, '-', '_' and '.', got %q", id))
	}
	return nil
}

// kernelProc is a kernel's process: a command of the process service
// under a tag of its own, whose output goes to onOutput (when set) and
// whose last kernelTailBytes are kept for the error when it dies.
type kernelProc struct {
	srv  *server
	tag  string
	pid  uint32
	done chan struct{} // closed when the process has ended

	mu     sync.Mutex
	tail   []byte
	status string // how it ended ("exit status 1"), once it has
}

// startKernelProc starts argv for c, as its user in its directory, and
// returns once it runs. onOutput, when not nil, receives its output (from
// one goroutine, in order); stdinOpen gives it a stdin pipe that input
// writes to.
func (x *contexts) startKernelProc(c *codeContext, argv []string, env map[string]string, stdinOpen bool, onOutput func(stderr bool, data []byte)) (*kernelProc, error) {
	kp := &kernelProc{srv: x.srv, tag: "hutch-context-" + c.id + "-" + newContextID()[:6], done: make(chan struct{})}
	envs := maps.Clone(c.env)
	if envs == nil {
		envs = map[string]string{}
	}
	maps.Copy(envs, env)
	cwd := c.dir
	req := startRequest{
		acct:      c.acct,
		config:    &process.ProcessConfig{Cmd: argv[0], Args: argv[1:], Envs: envs, Cwd: &cwd},
		tag:       &kp.tag,
		stdin:     stdinOpen,
		stdinOpen: stdinOpen,
		grace:     0,
	}
	started := make(chan error, 1)
	go func() {
		defer close(kp.done)
		err := x.srv.procs.start(context.Background(), req, func(_ *command, ev *process.ProcessEvent) error {
			switch e := ev.GetEvent().(type) {
			case *process.ProcessEvent_Start:
				kp.pid = e.Start.GetPid()
				started <- nil
			case *process.ProcessEvent_End:
				kp.mu.Lock()
				kp.status = e.End.GetStatus()
				kp.mu.Unlock()
			case *process.ProcessEvent_Data:
				stderr, data := false, e.Data.GetStdout()
				if e.Data.GetStderr() != nil {
					stderr, data = true, e.Data.GetStderr()
				}
				kp.keep(data)
				if onOutput != nil {
					onOutput(stderr, data)
				}
			}
			return nil
		})
		if err != nil {
			select {
			case started <- err:
			default:
			}
		}
	}()
	if err := <-started; err != nil {
		var ce *connect.Error
		if errors.As(err, &ce) && strings.Contains(ce.Message(), "executable file not found") {
			return nil, missingKernel(c.language, ce.Message())
		}
		return nil, err
	}
	return kp, nil
}

func (kp *kernelProc) keep(data []byte) {
	kp.mu.Lock()
	defer kp.mu.Unlock()
	kp.tail = append(kp.tail, data...)
	if over := len(kp.tail) - kernelTailBytes; over > 0 {
		kp.tail = kp.tail[over:]
	}
}

// output returns the kernel's last output, trimmed.
func (kp *kernelProc) output() string {
	kp.mu.Lock()
	defer kp.mu.Unlock()
	return strings.TrimSpace(string(kp.tail))
}

// signal sends sig to the kernel's process group: the kernel and what
// runs in its foreground.
func (kp *kernelProc) signal(sig syscall.Signal) {
	c, err := kp.srv.procs.find(tagSelector(kp.tag))
	if err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == stateRunning {
		_ = syscall.Kill(-int(c.pid), sig) // the shim starts each command in a process group of its own
	}
}

// kill kills the kernel's process tree and waits for its end.
func (kp *kernelProc) kill() {
	_ = kp.srv.procs.signal(tagSelector(kp.tag), syscall.SIGKILL)
	<-kp.done
}

// died is the error of a kernel that ended: what it said last.
func (kp *kernelProc) died(language string) error {
	out := kp.output()
	if strings.Contains(out, "No module named ipykernel") {
		return missingKernel(language, out)
	}
	kp.mu.Lock()
	status := kp.status
	kp.mu.Unlock()
	if out == "" {
		out = "it wrote nothing"
	}
	return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("the %s kernel ended (%s): %s", language, status, lastLines(out, 5)))
}

func missingKernel(language, detail string) error {
	return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("%s contexts need %s; this sandbox lacks it (%s)",
		language, kernelNeeds[language], lastLines(detail, 1)))
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " / ")
}

func tagSelector(tag string) *process.ProcessSelector {
	return &process.ProcessSelector{Selector: &process.ProcessSelector_Tag{Tag: tag}}
}
