package agent

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"connectrpc.com/connect"

	"github.com/hutchdev/hutch/internal/agent/agentpb/hutchagent"
	"github.com/hutchdev/hutch/internal/agent/jupyter"
)

// Jupyter kernels: ipykernel for python, Deno's for javascript and
// typescript. The agent writes the kernel a connection file, starts it,
// and speaks Jupyter's protocol to it over ZeroMQ on the sandbox's
// loopback (package jupyter).

type jupyterKernel struct {
	language string
	proc     *kernelProc
	client   *jupyter.Client
	dir      string
	// interruptBySignal: see jupyterSpec.bySignal.
	interruptBySignal bool
}

// jupyterSpec is how one kind of Jupyter kernel starts and is spoken to.
type jupyterSpec struct {
	// argv is the kernel's command, given its directory and its
	// connection file there.
	argv func(dir, conn string) []string
	env  map[string]string
	// files are written to the kernel's directory before it starts, by
	// name, for the kernel's user to read.
	files map[string][]byte
	// bySignal: the kernel stops its cell on SIGINT (its interrupt_mode
	// is signal); else it takes an interrupt_request.
	bySignal bool
	linger   time.Duration // see jupyter.Client.Linger
}

// kernelFormatters adds the display formatters of E2B's code interpreter
// (e2b/chart for matplotlib's figures, e2b/data for pandas' DataFrames)
// to every python kernel; see the file's own comment.
//
//go:embed kernel_formatters.py
var kernelFormatters []byte

// kernelFormattersFile is its name in the kernel's directory.
const kernelFormattersFile = "hutch_formatters.py"

func startIPyKernel(x *contexts, c *codeContext) (kernel, error) {
	return startJupyterKernel(x, c, jupyterSpec{
		argv: func(dir, conn string) []string {
			// No history database: every kernel would open the same SQLite
			// file in the user's home, for nothing a context uses.
			return []string{"python3", "-m", "ipykernel_launcher", "-f", conn, "--HistoryManager.enabled=False", "--InteractiveShell.colors=NoColor",
				"--IPKernelApp.exec_lines=" + formattersLine(filepath.Join(dir, kernelFormattersFile))}
		},
		env:      map[string]string{"PYTHONUNBUFFERED": "1"},
		files:    map[string][]byte{kernelFormattersFile: kernelFormatters},
		bySignal: true,
	})
}

// formattersLine is the line the kernel runs at its start to load the
// formatters from path: runpy keeps them out of the user's namespace, and
// IPKernelApp runs exec_lines unnumbered, so the first cell is still 1.
// A line that fails is only logged by the kernel, which starts all the
// same.
func formattersLine(path string) string {
	// The path is under /tmp/hutch-kernel-…, ASCII, which strconv quotes
	// as Python does. No quote may end the line: traitlets would take it
	// for a Python literal.
	return "import runpy as _hutch_runpy; _hutch_runpy.run_path(" + strconv.Quote(path) + ", run_name='hutch_formatters'); del _hutch_runpy"
}

func startDenoKernel(x *contexts, c *codeContext) (kernel, error) {
	return startJupyterKernel(x, c, jupyterSpec{
		argv:   func(_, conn string) []string { return []string{"deno", "jupyter", "--kernel", "--conn", conn} },
		env:    map[string]string{"NO_COLOR": "1"},
		linger: denoLinger,
	})
}

// denoLinger is how long a call to Deno's kernel waits, after the kernel
// is idle, for output still on its way: its execute_result is broadcast
// from JavaScript, on another path than its status, and can come after
// it (Deno's own kernel sleeps 5 ms for its streams for the same reason).
const denoLinger = 30 * time.Millisecond

func startJupyterKernel(x *contexts, c *codeContext, spec jupyterSpec) (kernel, error) {
	ci, err := jupyter.NewConnectionInfo()
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, err)
	}
	dir, err := userTempDir(c.acct)
	if err != nil {
		return nil, err
	}
	conn := filepath.Join(dir, "connection.json")
	if err := ci.WriteFile(conn, int(c.acct.UID), int(c.acct.GID)); err != nil {
		removeAll(dir)
		return nil, connect.NewError(connect.CodeInternal, err)
	}
	for name, data := range spec.files {
		if err := writeUserFile(filepath.Join(dir, name), data, dir); err != nil {
			removeAll(dir)
			return nil, err
		}
	}
	proc, err := x.startKernelProc(c, spec.argv(dir, conn), spec.env, false, nil)
	if err != nil {
		removeAll(dir)
		return nil, err
	}
	k := &jupyterKernel{language: c.language, proc: proc, dir: dir, interruptBySignal: spec.bySignal}
	if err := k.connect(ci); err != nil {
		k.close()
		return nil, err
	}
	k.client.Linger = spec.linger
	return k, nil
}

// connect dials the kernel and waits until it answers, or dies.
func (k *jupyterKernel) connect(ci jupyter.ConnectionInfo) error {
	ctx, cancel := k.untilExit(context.Background())
	defer cancel()
	ctx, cancelStart := context.WithTimeout(ctx, kernelStartTimeout)
	defer cancelStart()
	client, err := jupyter.Dial(ctx, ci)
	if err == nil {
		k.client = client
		err = client.WaitReady(ctx)
	}
	select {
	case <-k.proc.done:
		return k.proc.died(k.language)
	default:
	}
	if err != nil {
		return connect.NewError(connect.CodeDeadlineExceeded, errors.New("the "+k.language+" kernel did not answer within "+kernelStartTimeout.String()+": "+err.Error()))
	}
	return nil
}

// untilExit is ctx, also ended when the kernel's process ends.
func (k *jupyterKernel) untilExit(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-k.proc.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

func (k *jupyterKernel) pid() uint32             { return k.proc.pid }
func (k *jupyterKernel) exited() <-chan struct{} { return k.proc.done }

func (k *jupyterKernel) interrupt() {
	if k.interruptBySignal {
		k.proc.signal(syscall.SIGINT)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = k.client.Interrupt(ctx) // a kernel that does not stop is restarted at the grace's end
}

func (k *jupyterKernel) close() {
	if k.client != nil {
		_ = k.client.Close()
	}
	k.proc.kill()
	removeAll(k.dir)
}

func (k *jupyterKernel) execute(ctx context.Context, code string, send func(*hutchagent.CodeEvent) error) (uint32, error) {
	runCtx, cancel := k.untilExit(ctx)
	defer cancel()
	reply, err := k.client.Execute(runCtx, code, func(ev jupyter.Event) error {
		out, err := codeEvent(ev)
		if out == nil || err != nil {
			return err
		}
		return send(out)
	})
	select {
	case <-k.proc.done:
		return 0, k.proc.died(k.language)
	default:
	}
	if err != nil {
		if ctx.Err() != nil {
			return 0, connect.NewError(connect.CodeCanceled, ctx.Err())
		}
		var ce *connect.Error
		if errors.As(err, &ce) {
			return 0, err // send's
		}
		return 0, connect.NewError(connect.CodeUnavailable, err)
	}
	return uint32(max(reply.ExecutionCount, 0)), nil // #nosec G115 -- clamped to >= 0; counts stay small
}

// codeEvent is the agent's event of a kernel's; nil for the kinds it does
// not pass on (clear_output).
func codeEvent(ev jupyter.Event) (*hutchagent.CodeEvent, error) {
	switch ev.Kind {
	case jupyter.EventStdout:
		return &hutchagent.CodeEvent{Event: &hutchagent.CodeEvent_Stdout{Stdout: ev.Text}}, nil
	case jupyter.EventStderr:
		return &hutchagent.CodeEvent{Event: &hutchagent.CodeEvent_Stderr{Stderr: ev.Text}}, nil
	case jupyter.EventResult, jupyter.EventDisplay:
		data, err := json.Marshal(ev.Data)
		if err != nil {
			return nil, connect.NewError(connect.CodeInternal, err)
		}
		var meta []byte
		if len(ev.Metadata) > 0 {
			if meta, err = json.Marshal(ev.Metadata); err != nil {
				return nil, connect.NewError(connect.CodeInternal, err)
			}
		}
		return &hutchagent.CodeEvent{Event: &hutchagent.CodeEvent_Result{Result: &hutchagent.CodeResult{
			Data: data, Metadata: meta, IsMainResult: ev.Kind == jupyter.EventResult,
		}}}, nil
	case jupyter.EventError:
		e := ev.Error
		return &hutchagent.CodeEvent{Event: &hutchagent.CodeEvent_Error{Error: &hutchagent.CodeError{
			Name: e.Name, Value: e.Value, Traceback: e.Traceback,
		}}}, nil
	}
	return nil, nil
}
