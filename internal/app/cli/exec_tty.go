package cli

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/hutchdev/hutch/client"
)

// execSession runs argv (none: the login shell) in sandbox id as a
// terminal session: with tty, from the local terminal, put in raw mode
// meanwhile, whose size the remote one follows; without, hutch's stdin
// streamed to the command's, its stdout and stderr kept apart. It returns
// an exitCode error carrying the command's status when that is not 0.
func (a *app) execSession(cmd *cobra.Command, f execFlags, id string, argv []string, tty bool) error {
	ctx := cmd.Context()
	if f.timeout < 0 {
		return usageErrorf(cmd, "--timeout must not be negative")
	}
	env, err := parseEnv(a, cmd, f.env)
	if err != nil {
		return err
	}
	req := client.PtyRequest{Command: shellJoin(argv), Cwd: f.workdir, User: f.user, Env: env, NoTTY: !tty}
	var local *os.File
	if tty {
		in, ok := a.stdin.(*os.File)
		if !ok || !term.IsTerminal(int(in.Fd())) { // #nosec G115 -- a file descriptor
			return usageErrorf(cmd, "-t needs a terminal on stdin; to pass input without one, use -i alone")
		}
		local = in
		if req.Cols, req.Rows, err = term.GetSize(int(in.Fd())); err != nil { // #nosec G115 -- a file descriptor
			return usageErrorf(cmd, "-t: read the terminal's size: %v", err)
		}
	}
	c, err := a.connect()
	if err != nil {
		return err
	}
	sess, err := c.Pty(ctx, id, req)
	if err != nil {
		return err
	}
	defer func() { _ = sess.Close() }()
	restore := func() {}
	if local != nil {
		if restore, err = rawTerminal(ctx, local, sess); err != nil {
			return err
		}
		defer restore()
	}
	go a.sendInput(ctx, sess, !tty)
	var timedOut atomic.Bool
	if f.timeout > 0 {
		t := time.AfterFunc(f.timeout, func() {
			timedOut.Store(true)
			_ = sess.Signal(ctx, "KILL")
		})
		defer t.Stop()
	}
	exit, err := sess.Copy(ctx, a.stdout, a.stderr)
	if err != nil {
		return err
	}
	restore() // before anything is printed
	if timedOut.Load() {
		exit.TimedOut = true
	}
	return a.exitStatus(exit.ExecExit, f.timeout)
}

// rawTerminal puts the local terminal in raw mode, so that what is typed
// (^C, ^D, arrows) goes to the remote one as it is, and has the remote
// one follow its size. restore puts it back; call it on every way out.
func rawTerminal(ctx context.Context, local *os.File, sess *client.PtySession) (restore func(), err error) {
	fd := int(local.Fd()) // #nosec G115 -- a file descriptor
	state, err := term.MakeRaw(fd)
	if err != nil {
		return nil, err
	}
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-winch:
			case <-done:
				return
			}
			if cols, rows, err := term.GetSize(fd); err == nil {
				_ = sess.Resize(ctx, cols, rows) // a failed resize shows on the screen
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			signal.Stop(winch)
			close(done)
			_ = term.Restore(fd, state)
		})
	}, nil
}

// sendInput copies hutch's stdin to the session until it ends; then, with
// eof, it ends the command's input.
func (a *app) sendInput(ctx context.Context, sess *client.PtySession, eof bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := a.stdin.Read(buf)
		if n > 0 {
			if sess.Write(ctx, buf[:n]) != nil {
				return // the session ended: its output says how
			}
		}
		if err != nil {
			if eof && errors.Is(err, io.EOF) {
				_ = sess.CloseInput(ctx)
			}
			return
		}
	}
}

// shellSafe are words a shell reads as themselves.
var shellSafe = regexp.MustCompile(`^[A-Za-z0-9@%+=:,./_-]+$`)

// shellJoin makes argv the command line a shell runs as that argv: words
// quoted where they need it.
func shellJoin(argv []string) string {
	words := make([]string, len(argv))
	for i, w := range argv {
		if shellSafe.MatchString(w) {
			words[i] = w
		} else {
			words[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
		}
	}
	return strings.Join(words, " ")
}
