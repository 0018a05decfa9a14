package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"

	"connectrpc.com/connect"

	"github.com/hutchdev/hutch/internal/agent/tools"
)

// maxToolArgs bounds a tool call's arguments (a whole file to write).
const maxToolArgs = 32 << 20

// runTool runs file tool name of package tools with its JSON arguments,
// acting for acct (what it makes is theirs), relative paths in dir
// (default: acct's home). It returns the tool's JSON result, or the tool's
// own failure.
func (s *server) runTool(name string, args []byte, dir string, acct account) (json.RawMessage, *tools.Error) {
	if len(args) > maxToolArgs {
		return nil, &tools.Error{Kind: tools.KindInvalidArgument, Message: fmt.Sprintf("the arguments are over %d MiB", maxToolArgs>>20)}
	}
	if dir == "" {
		dir = acct.Home
	}
	files := tools.Files{Dir: dir, UID: int(acct.UID), GID: int(acct.GID), Exec: s.runHelper}
	res, err := files.Run(name, args)
	var result json.RawMessage
	if err == nil {
		result, err = json.Marshal(res)
	}
	if err != nil {
		var failed *tools.Error
		if !errors.As(err, &failed) {
			failed = &tools.Error{Kind: tools.KindFailed, Message: err.Error()}
		}
		return nil, failed
	}
	return result, nil
}

// archive writes directory path, as acct sees it, to w packed as format
// (tools.FormatTarGz, the default, tools.FormatZip, or tools.FormatTar,
// which the daemon asks for when it redacts the files itself). Errors
// before the first byte is written are Connect errors.
func (s *server) archive(w io.Writer, path, format string, acct account) error {
	switch format {
	case "", tools.FormatTarGz, tools.FormatZip, tools.FormatTar:
	default:
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("format must be %s, %s or %s, got %q", tools.FormatTarGz, tools.FormatZip, tools.FormatTar, format))
	}
	p, err := resolvePath(path, acct)
	if err != nil {
		return err
	}
	if fi, err := os.Stat(p); err != nil {
		return fsError(err)
	} else if !fi.IsDir() {
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s is not a directory", p))
	}
	if err := tools.WriteArchive(w, p, format); err != nil {
		return fmt.Errorf("archive %s: %w", p, err)
	}
	return nil
}

// runHelper runs a tool's helper program (rg) as the agent's child,
// started through the reaper so that its orphan reaping leaves it to this
// wait, and copies its output. It is killed when ctx ends.
func (s *server) runHelper(ctx context.Context, dir string, argv []string, stdout, stderr io.Writer) error {
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return err
	}
	defer outR.Close()
	errR, errW, err := os.Pipe()
	if err != nil {
		_ = outW.Close()
		return err
	}
	defer errR.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		_, _ = outW.Close(), errW.Close()
		return err
	}
	attr := &syscall.ProcAttr{Dir: dir, Env: s.baseEnv, Files: []uintptr{null.Fd(), outW.Fd(), errW.Fd()}}
	pid, err := s.reaper.spawn(path, argv, attr, true) // true: not the direct command's tree
	_, _, _ = null.Close(), outW.Close(), errW.Close()
	if err != nil {
		return err
	}
	defer s.reaper.forget(pid)
	stop := context.AfterFunc(ctx, func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	defer stop()
	var copying sync.WaitGroup
	for _, c := range []struct {
		w io.Writer
		r *os.File
	}{{stdout, outR}, {stderr, errR}} {
		copying.Go(func() { _, _ = io.Copy(c.w, c.r) })
	}
	var ws syscall.WaitStatus
	for {
		_, err = syscall.Wait4(pid, &ws, 0, nil)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	copying.Wait()
	if err != nil {
		return err
	}
	if code := ws.ExitStatus(); !ws.Exited() || code != 0 {
		return &tools.ExitError{Code: max(code, 1)}
	}
	return nil
}
