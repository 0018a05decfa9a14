package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"connectrpc.com/connect"

	"github.com/hutchdev/hutch/internal/agent/agentpb/hutchagent"
)

// bash contexts: no Jupyter kernel for bash is packaged in Debian, and a
// shell needs none. One bash process reads, on its stdin, a line per cell
// that sources the cell's file inside a function, so that variables,
// functions and `cd` persist. After the cell it prints an end marker with
// the cell's status to stdout and another to stderr: once both have come
// through, everything the cell wrote has.
//
// An interrupt is SIGINT to bash's process group: the command in the
// foreground dies of it, and bash's trap returns from the function that
// sources the cell, so the shell and its state live on (a cell that loops
// in a function of its own would only leave that function: the timeout's
// grace then restarts the kernel).

// bashInit defines what each cell line calls. A cell's stdin is
// /dev/null: bash's own stdin carries the cells.
const bashInit = `__hutch_cell() { . "$1"; }
__hutch_run() {
	trap 'return 130' INT
	__hutch_cell "$1" </dev/null
	local status=$?
	trap : INT
	printf '\036HUTCH-END %s %d\n' "$2" "$status"
	printf '\036HUTCH-END %s\n' "$2" >&2
}
trap : INT
`

// markerByte starts an end marker: output is held back from it to the end
// of its line, in case that line ends with a marker.
const markerByte = '\036'

type bashKernel struct {
	proc *kernelProc
	dir  string // where cells are written, the user's

	mu   sync.Mutex
	cell *bashCell // the cell running, nil between cells
	// held is output of each stream held back while it may be a marker.
	held [2][]byte
}

// bashCell is the cell that runs: where its output goes and which of its
// markers have come.
type bashCell struct {
	nonce  string
	send   func(*hutchagent.CodeEvent) error
	status int
	ended  [2]bool
	done   chan struct{}
	err    error // the first failed send
}

func startBashKernel(x *contexts, c *codeContext) (kernel, error) {
	dir, err := userTempDir(c.acct)
	if err != nil {
		return nil, err
	}
	k := &bashKernel{dir: dir}
	kp, err := x.startKernelProc(c, []string{"bash", "--noprofile", "--norc"}, nil, true, k.output)
	if err != nil {
		removeAll(dir)
		return nil, err
	}
	k.proc = kp
	if err := k.write(context.Background(), []byte(bashInit)); err != nil {
		k.close()
		return nil, err
	}
	return k, nil
}

func (k *bashKernel) pid() uint32             { return k.proc.pid }
func (k *bashKernel) exited() <-chan struct{} { return k.proc.done }
func (k *bashKernel) interrupt()              { k.proc.signal(syscall.SIGINT) }

func (k *bashKernel) close() {
	k.proc.kill()
	removeAll(k.dir)
}

// write writes to bash's stdin.
func (k *bashKernel) write(ctx context.Context, p []byte) error {
	c, err := k.proc.srv.procs.find(tagSelector(k.proc.tag))
	if err != nil {
		return k.proc.died("bash")
	}
	return c.writeStdin(ctx, p)
}

func (k *bashKernel) execute(ctx context.Context, code string, send func(*hutchagent.CodeEvent) error) (uint32, error) {
	nonce := newContextID()
	file := filepath.Join(k.dir, "cell-"+nonce+".sh")
	if err := writeUserFile(file, []byte(code), k.dir); err != nil {
		return 0, err
	}
	defer func() { _ = os.Remove(file) }()
	cell := &bashCell{nonce: nonce, send: send, done: make(chan struct{})}
	k.mu.Lock()
	k.cell = cell
	k.mu.Unlock()
	defer func() {
		k.mu.Lock()
		k.cell = nil
		k.mu.Unlock()
	}()
	if err := k.write(ctx, fmt.Appendf(nil, "__hutch_run %s %s\n", file, nonce)); err != nil {
		return 0, err
	}
	select {
	case <-cell.done:
		if cell.err != nil {
			return 0, cell.err
		}
		if cell.status != 0 {
			ev := &hutchagent.CodeError{Name: "ExitStatus", Value: strconv.Itoa(cell.status)}
			if err := send(&hutchagent.CodeEvent{Event: &hutchagent.CodeEvent_Error{Error: ev}}); err != nil {
				return 0, err
			}
		}
		return 0, nil
	case <-k.proc.done:
		return 0, k.proc.died("bash")
	case <-ctx.Done():
		return 0, connect.NewError(connect.CodeCanceled, ctx.Err())
	}
}

// output takes bash's output as it comes, from one goroutine: it passes
// it on to the running cell, holding back a line that has the marker
// byte until its end, since a marker ends its line (after the cell's
// last output, when that has no newline of its own).
func (k *bashKernel) output(stderr bool, data []byte) {
	i := 0
	if stderr {
		i = 1
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	buf := append(k.held[i], data...)
	k.held[i] = nil
	for len(buf) > 0 {
		m := bytes.IndexByte(buf, markerByte)
		if m < 0 {
			k.pass(i, buf)
			return
		}
		k.pass(i, buf[:m])
		buf = buf[m:]
		nl := bytes.IndexByte(buf, '\n')
		if nl < 0 {
			k.held[i] = append([]byte(nil), buf...)
			return
		}
		line := buf[:nl]
		buf = buf[nl+1:]
		at := bytes.LastIndex(line, []byte(markerPrefix))
		nonce, status, ok := parseMarker(line[max(at, 0):])
		if at < 0 || !ok {
			k.pass(i, append(line, '\n'))
			continue
		}
		k.pass(i, line[:at])
		k.ended(i, nonce, status)
	}
}

// markerPrefix starts an end marker's line (see bashInit).
const markerPrefix = "\036HUTCH-END "

// parseMarker parses an end marker: stdout's has the cell's status.
func parseMarker(b []byte) (nonce string, status int, ok bool) {
	f := strings.Fields(strings.TrimPrefix(string(b), markerPrefix))
	if !bytes.HasPrefix(b, []byte(markerPrefix)) || len(f) < 1 || len(f) > 2 {
		return "", 0, false
	}
	if len(f) == 2 {
		n, err := strconv.Atoi(f[1])
		if err != nil {
			return "", 0, false
		}
		status = n
	}
	return f[0], status, true
}

// ended notes the running cell's end marker on stream i; a marker of
// another cell (an interrupted one's, late) is dropped.
func (k *bashKernel) ended(i int, nonce string, status int) {
	cell := k.cell
	if cell == nil || nonce != cell.nonce || cell.ended[i] {
		return
	}
	if i == 0 {
		cell.status = status
	}
	cell.ended[i] = true
	if cell.ended[0] && cell.ended[1] {
		close(cell.done)
	}
}

// pass sends a stream's output to the running cell; between cells (from
// something a cell left running) it is dropped.
func (k *bashKernel) pass(i int, data []byte) {
	cell := k.cell
	if len(data) == 0 || cell == nil || cell.err != nil {
		return
	}
	ev := &hutchagent.CodeEvent{Event: &hutchagent.CodeEvent_Stdout{Stdout: string(data)}}
	if i == 1 {
		ev.Event = &hutchagent.CodeEvent_Stderr{Stderr: string(data)}
	}
	cell.err = cell.send(ev)
}

// userTempDir makes a directory in /tmp that only acct (and root) may
// enter, for a kernel's files.
func userTempDir(acct account) (string, error) {
	dir, err := os.MkdirTemp("/tmp", "hutch-kernel-")
	if err != nil {
		return "", connect.NewError(connect.CodeInternal, fmt.Errorf("make the kernel's directory: %w", err))
	}
	if err := os.Chown(dir, int(acct.UID), int(acct.GID)); err != nil {
		removeAll(dir)
		return "", connect.NewError(connect.CodeInternal, fmt.Errorf("give the kernel's directory to %s: %w", acct.Name, err))
	}
	return dir, nil
}

// writeUserFile writes a new file that the owner of dir may read. The
// file must not exist: O_EXCL also refuses a link planted in its place.
func writeUserFile(path string, data []byte, dir string) error {
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return connect.NewError(connect.CodeInternal, fmt.Errorf("the kernel's directory: %w", err))
	}
	// #nosec G304 -- a file of the agent's own making, in its own directory
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return connect.NewError(connect.CodeInternal, fmt.Errorf("write the cell: %w", err))
	}
	_, err1 := f.Write(data)
	err2 := f.Chown(int(st.Uid), int(st.Gid))
	if err := errors.Join(err1, err2, f.Close()); err != nil {
		return connect.NewError(connect.CodeInternal, fmt.Errorf("write the cell: %w", err))
	}
	return nil
}
