// Package tools is the sandbox tool catalogue for LLM agents: for each
// tool, a description written for a model and a JSON schema of its
// arguments (catalogue.go), and, for the file tools, what it does. The file
// tools run inside the sandbox, in its agent, on the sandbox's own files:
// paths, symlinks and ".." resolve in the sandbox's tree, never the host's.
// On the host (sandbox modes selective and off) they run Confined to one
// directory, where nothing leads out of it (fsys.go).
//
// Failures are *Error values whose Kind a model can act on.
package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// Error kinds, as the tool API reports them.
const (
	KindInvalidArgument = "invalid_argument"
	KindNotFound        = "not_found"
	KindTimeout         = "timeout"
	KindCommandFailed   = "command_failed"
	KindBlockedByPolicy = "blocked_by_policy"
	// KindFailed is any other failure (a full disk, a permission denied).
	KindFailed = "failed"
)

// Error is a tool's failure.
type Error struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Message }

func invalid(format string, args ...any) error {
	return &Error{Kind: KindInvalidArgument, Message: fmt.Sprintf(format, args...)}
}

// fileError turns an error of the os package into an *Error, naming the
// path as the caller gave it.
func fileError(err error) error {
	var te *Error
	if errors.As(err, &te) {
		return te
	}
	msg := err.Error()
	var pe *fs.PathError
	if errors.As(err, &pe) {
		msg = pe.Path + ": " + pe.Err.Error()
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &Error{Kind: KindNotFound, Message: msg}
	case errors.Is(err, errOutside):
		return &Error{Kind: KindBlockedByPolicy, Message: msg + ": tool calls on the host reach only the files in it"}
	case errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.ENAMETOOLONG):
		return &Error{Kind: KindInvalidArgument, Message: msg}
	}
	return &Error{Kind: KindFailed, Message: msg}
}

// Files runs the file tools on the filesystem the calling process sees:
// inside a sandbox, the sandbox's; or, Confined, on Dir's tree alone.
type Files struct {
	// Dir is what relative paths are resolved against (the workspace).
	Dir string
	// UID and GID own what the tools create.
	UID, GID int
	// Confined keeps every path inside Dir (fsys.go): an absolute path
	// elsewhere, or one that ".." or a symlink takes out of it, is refused,
	// and so is a file with several hard links that is not UID's; ripgrep
	// is not used. For tool calls on the host, where the caller is root
	// and nothing else confines them.
	Confined bool
	// Exec, when not nil, runs a helper program a tool uses (rg) in dir,
	// until it exits or ctx ends, its output to stdout and stderr; a
	// non-zero exit is an *ExitError. Nil uses os/exec. (The agent, PID 1
	// of its sandbox, starts its children through its reaper.)
	Exec func(ctx context.Context, dir string, argv []string, stdout, stderr io.Writer) error

	fs fsys // set by Run
}

// ExitError is a helper program's non-zero exit.
type ExitError struct{ Code int }

func (e *ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// exec runs a helper program, with f.Exec or os/exec.
func (f Files) exec(ctx context.Context, dir string, argv []string, stdout, stderr io.Writer) error {
	if f.Exec != nil {
		return f.Exec(ctx, dir, argv, stdout, stderr)
	}
	// #nosec G204 -- a helper program (rg) with arguments, no shell
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, stdout, stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() > 0 {
		return &ExitError{Code: ee.ExitCode()}
	}
	return err
}

// Run runs file tool name with its JSON arguments and returns its result,
// to be encoded as JSON.
func (f Files) Run(name string, args json.RawMessage) (any, error) {
	f.fs = osFS{}
	if f.Confined {
		f.Dir = filepath.Clean(f.Dir)
		root, err := os.OpenRoot(f.Dir)
		if err != nil {
			return nil, fileError(err)
		}
		defer func() { _ = root.Close() }() // what was written through it is closed already
		f.fs = rootFS{root: root, dir: f.Dir, uid: f.UID}
	}
	switch name {
	case ReadFile:
		return run(args, f.readFile)
	case WriteFile:
		return run(args, f.writeFile)
	case FindReplace:
		return run(args, f.findReplace)
	case ApplyPatch:
		return run(args, f.applyPatch)
	case DeleteFile:
		return run(args, f.deleteFile)
	case ListDirectory:
		return run(args, f.listDirectory)
	case GrepFiles:
		return run(args, f.grepFiles)
	case FindFiles:
		return run(args, f.findFiles)
	}
	return nil, &Error{Kind: KindNotFound, Message: fmt.Sprintf("no file tool %q", name)}
}

// run decodes args into A and calls fn.
func run[A, R any](args json.RawMessage, fn func(A) (R, error)) (any, error) {
	var a A
	if err := DecodeArgs(args, &a); err != nil {
		return nil, err
	}
	return fn(a)
}

// DecodeArgs decodes a tool's JSON arguments into v, refusing fields the
// tool does not have; an error is an *Error of kind invalid_argument.
// No arguments leave v as it is.
func DecodeArgs(args json.RawMessage, v any) error {
	if len(args) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return invalid("arguments: %v", err)
	}
	return nil
}

// abs resolves p, absolute or relative to f.Dir.
func (f Files) abs(p string) (string, error) {
	if p == "" {
		return "", invalid("path is required")
	}
	if strings.ContainsRune(p, 0) {
		return "", invalid("path %q contains a NUL byte", p)
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(f.Dir, p)
	}
	p = filepath.Clean(p)
	if rel, err := filepath.Rel(f.Dir, p); f.Confined && (err != nil || rel != "." && !filepath.IsLocal(rel)) {
		return "", &Error{Kind: KindBlockedByPolicy, Message: fmt.Sprintf(
			"%s is out of %s: tool calls on the host reach only the files in that directory", p, f.Dir)}
	}
	return p, nil
}

// dirOrDefault resolves p as abs does, "" meaning f.Dir: where the
// directory tools look by default.
func (f Files) dirOrDefault(p string) (string, error) {
	if p == "" {
		return f.Dir, nil
	}
	return f.abs(p)
}

// mkdirs makes dir and its missing parents, owned by f's user.
func (f Files) mkdirs(dir string) error {
	if fi, err := f.fs.Stat(dir); err == nil {
		if !fi.IsDir() {
			return invalid("%s is not a directory", dir)
		}
		return nil
	}
	if err := f.mkdirs(filepath.Dir(dir)); err != nil {
		return err
	}
	// #nosec G301 -- a directory of the sandbox user's, as mkdir -p makes it
	if err := f.fs.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fileError(err)
	}
	return fileError0(f.fs.Lchown(dir, f.UID, f.GID))
}

// fileError0 is fileError of a possibly nil error.
func fileError0(err error) error {
	if err == nil {
		return nil
	}
	return fileError(err)
}
