package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"syscall"

	"connectrpc.com/connect"

	"github.com/hutchdev/hutch/internal/tools"
)

// maxToolArgs bounds a tool call's arguments (a whole file to write).
const maxToolArgs = 32 << 20

// runTool serves POST /tools/{name}?cwd=DIR[&username=U]: file tool name
// of package tools, its JSON arguments the body, acting for the request's
// user (what it makes is theirs), relative paths in DIR (default: the
// user's home). A tool's own failure is a 200 whose answer says so.
func (s *server) runTool(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	acct, err := s.requestUser(r.Header, q.Get("username"))
	if err != nil {
		writeHTTPError(w, err)
		return
	}
	dir := q.Get("cwd")
	if dir == "" {
		dir = acct.Home
	}
	args, err := io.ReadAll(io.LimitReader(r.Body, maxToolArgs+1))
	if err != nil {
		writeHTTPError(w, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("read the arguments: %w", err)))
		return
	}
	var answer tools.Answer
	if len(args) > maxToolArgs {
		answer.Error = &tools.Error{Kind: tools.KindInvalidArgument, Message: fmt.Sprintf("the arguments are over %d MiB", maxToolArgs>>20)}
	} else {
		files := tools.Files{Dir: dir, UID: int(acct.UID), GID: int(acct.GID), Exec: s.runHelper}
		res, err := files.Run(r.PathValue("name"), args)
		if err == nil {
			answer.Result, err = json.Marshal(res)
		}
		if err != nil && !errors.As(err, &answer.Error) {
			answer.Error = &tools.Error{Kind: tools.KindFailed, Message: err.Error()}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(answer)
}

// getArchive serves GET /archive?path=DIR&format=tar.gz|zip[&username=U]:
// the directory packed as tools.WriteArchive does, streamed. An error once
// the stream has begun cuts it short.
func (s *server) getArchive(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if f := q.Get("format"); f != "" && f != tools.FormatTarGz && f != tools.FormatZip {
		writeHTTPError(w, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("format must be %s or %s, got %q", tools.FormatTarGz, tools.FormatZip, f)))
		return
	}
	acct, err := s.requestUser(r.Header, q.Get("username"))
	if err != nil {
		writeHTTPError(w, err)
		return
	}
	p, err := resolvePath(q.Get("path"), acct)
	if err != nil {
		writeHTTPError(w, err)
		return
	}
	if fi, err := os.Stat(p); err != nil {
		writeHTTPError(w, fsError(err))
		return
	} else if !fi.IsDir() {
		writeHTTPError(w, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s is not a directory", p)))
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	if err := tools.WriteArchive(w, p, q.Get("format")); err != nil {
		s.log.Warn("archive cut short", "path", p, "error", err)
	}
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
	attr := &syscall.ProcAttr{Dir: dir, Env: os.Environ(), Files: []uintptr{null.Fd(), outW.Fd(), errW.Fd()}}
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
