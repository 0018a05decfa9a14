package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/hutchdev/hutch/client"
)

// Exit codes of exec and run when the command did not exit by itself, as
// coreutils' timeout(1) and shells report them.
const (
	exitTimedOut  = 124
	exitOutOfCode = 255 // an exit code the OS cannot carry
)

// execFlags are the flags of a command run in a sandbox (exec and run).
type execFlags struct {
	env     []string // exec only; run's -e is the sandbox's
	workdir string
	timeout time.Duration
	user    string
	stdin   bool
}

func (f *execFlags) register(cmd *cobra.Command, withEnv bool) {
	fl := cmd.Flags()
	if withEnv {
		fl.StringArrayVarP(&f.env, "env", "e", nil, "environment variable `K=V` (or K, taken from here); repeatable")
	}
	fl.StringVarP(&f.workdir, "workdir", "w", "", "working directory (default /home/user/workspace)")
	fl.DurationVar(&f.timeout, "timeout", 0, "kill the command after this long (default 3m, at most 30m)")
	fl.StringVar(&f.user, "user", "", "run as `user` (the default) or root")
	fl.BoolVarP(&f.stdin, "stdin", "i", false, "pass hutch's standard input to the command")
	// A flag of the command itself, given without "--", lands here.
	cmd.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usageErrorf(cmd, "%v (to pass flags to the command, put it after --)", err)
	})
}

func (f *execFlags) request(a *app, cmd *cobra.Command, argv []string) (client.ExecRequest, error) {
	req := client.ExecRequest{Cmd: argv, Cwd: f.workdir, User: f.user}
	if f.timeout < 0 {
		return req, usageErrorf(cmd, "--timeout must not be negative")
	}
	req.TimeoutS = seconds(f.timeout)
	var err error
	if req.Env, err = parseEnv(a, cmd, f.env); err != nil {
		return req, err
	}
	if f.stdin {
		b, err := readAll(cmd.Context(), a.stdin)
		if err != nil {
			return req, fmt.Errorf("read stdin: %w", err)
		}
		if !utf8.Valid(b) {
			return req, fmt.Errorf("stdin is not valid UTF-8 text; upload binary input with hutch cp and redirect it instead")
		}
		req.Stdin = string(b)
	}
	return req, nil
}

func (a *app) newExecCmd() *cobra.Command {
	var (
		f        execFlags
		language string
		tty      bool
	)
	cmd := &cobra.Command{
		Use:   "exec ID [flags] -- CMD [ARG...]",
		Short: "Run a command, or code in a language, in a sandbox",
		Long: "Run a command in a sandbox, streaming its output, and exit with its exit code\n" +
			"(124 if it timed out). The command runs directly, not through a shell: use\n" +
			"-- sh -c 'CMD | CMD' for pipes.\n\n" +
			"With -t, the command runs on a terminal of the sandbox, driven from this one\n" +
			"(raw mode; the size follows): -it with no command opens the login shell.\n" +
			"With -i alone, hutch's stdin streams to the command as it comes, stdout and\n" +
			"stderr kept apart. Either lasts until the command ends (or --timeout).\n\n" +
			"With --language, the arguments after ID are code (none: read from stdin),\n" +
			"written to a file and run with the language's interpreter: python, node,\n" +
			"typescript, deno, bun, bash or sh (go and ruby where the template has them).",
		Example: "  hutch exec abc123 -- ls -l\n  hutch exec abc123 -e DEBUG=1 -w /tmp -- sh -c 'echo $DEBUG > x'\n" +
			"  hutch exec -it abc123\n  hutch exec -it abc123 -- python3\n  hutch exec -i abc123 -- python3 - < main.py\n" +
			"  hutch exec abc123 --language python 'print(1 + 1)'\n  hutch exec abc123 --language typescript < main.ts",
		Args: func(cmd *cobra.Command, args []string) error {
			if language != "" {
				if len(args) < 1 {
					return usageErrorf(cmd, "give the sandbox ID, then the code (or none, to read it from stdin)")
				}
				return nil
			}
			if dash := cmd.ArgsLenAtDash(); dash > 1 || dash == 0 {
				return usageErrorf(cmd, "give the sandbox ID, then -- and the command")
			}
			if len(args) < 1 || len(args) < 2 && !tty && !f.stdin {
				return usageErrorf(cmd, "%q takes a sandbox ID and a command (none only with -i or -t: the login shell)", cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if language != "" {
				if tty {
					return usageErrorf(cmd, "-t does not go with --language: code runs without a terminal")
				}
				return a.runCode(cmd, f, language, args[0], args[1:])
			}
			if tty && a.jsonOutput() {
				return usageErrorf(cmd, "-t does not go with --output json: a terminal's output is not JSON")
			}
			// -i with --output json reads all of stdin first: the result
			// is one JSON object.
			if tty || f.stdin && !a.jsonOutput() {
				return a.execSession(cmd, f, args[0], args[1:], tty)
			}
			req, err := f.request(a, cmd, args[1:])
			if err != nil {
				return err
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			return a.exec(cmd.Context(), c, args[0], req, f.timeout)
		},
	}
	f.register(cmd, true)
	cmd.Flags().BoolVarP(&tty, "tty", "t", false, "run the command on a terminal, driven from this one (-it)")
	// -i streams here: --interactive is its usual name for that.
	cmd.Flags().BoolVar(&f.stdin, "interactive", false, "same as -i")
	_ = cmd.Flags().MarkHidden("interactive")
	cmd.Flags().StringVar(&language, "language", "", "run code in this `language` instead of a command")
	return cmd
}

// runCode runs code in a language in sandbox id: the words of code, or
// stdin when there are none.
func (a *app) runCode(cmd *cobra.Command, f execFlags, language, id string, code []string) error {
	if f.user != "" {
		return usageErrorf(cmd, "--user does not go with --language: code runs as the sandbox user")
	}
	f.stdin = len(code) == 0
	req, err := f.request(a, cmd, nil)
	if err != nil {
		return err
	}
	creq := client.CodeRequest{Language: language, Code: strings.Join(code, " "), Cwd: req.Cwd, Env: req.Env, TimeoutS: req.TimeoutS}
	if f.stdin {
		creq.Code = req.Stdin
	}
	c, err := a.connect()
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	return a.reportRun(f.timeout,
		func() (*client.ExecResult, error) { return c.RunCode(ctx, id, creq) },
		func(fn func(client.ExecEvent) error) (*client.ExecExit, error) {
			return c.RunCodeStream(ctx, id, creq, fn)
		})
}

// exec runs req in sandbox id: streamed to hutch's stdout and stderr, or with
// --output json as one result object. It returns an exitCode error carrying
// the command's status when that is not 0.
func (a *app) exec(ctx context.Context, c *client.Client, id string, req client.ExecRequest, timeout time.Duration) error {
	return a.reportRun(timeout,
		func() (*client.ExecResult, error) { return c.Exec(ctx, id, req) },
		func(fn func(client.ExecEvent) error) (*client.ExecExit, error) { return c.ExecStream(ctx, id, req, fn) })
}

// reportRun runs a command with whole (--output json: one result object) or
// stream (its output to hutch's stdout and stderr as it comes), and returns
// an exitCode error carrying the command's status when that is not 0.
func (a *app) reportRun(timeout time.Duration, whole func() (*client.ExecResult, error), stream func(func(client.ExecEvent) error) (*client.ExecExit, error)) error {
	var exit client.ExecExit
	if a.jsonOutput() {
		res, err := whole()
		if err != nil {
			return err
		}
		if err := a.printJSON(res); err != nil {
			return err
		}
		exit = client.ExecExit{ExitCode: res.ExitCode, DurationMS: res.DurationMS, TimedOut: res.TimedOut, KilledBy: res.KilledBy}
	} else {
		e, err := stream(func(ev client.ExecEvent) error {
			w := a.stdout
			if ev.Stream == client.Stderr {
				w = a.stderr
			}
			_, err := w.Write(ev.Data)
			return err
		})
		if err != nil {
			return err
		}
		exit = *e
	}
	return a.exitStatus(exit, timeout)
}

// exitStatus turns how a command ended into hutch's own exit.
func (a *app) exitStatus(exit client.ExecExit, timeout time.Duration) error {
	if exit.TimedOut || exit.KilledBy == client.KilledByTimeout {
		if timeout <= 0 {
			timeout = (time.Duration(exit.DurationMS) * time.Millisecond).Round(time.Second)
		}
		a.printf("hutch: command timed out after %s\n", timeout)
		return exitCode(exitTimedOut)
	}
	switch code := exit.ExitCode; {
	case code == 0:
		return nil
	case code < 0 || code > 255:
		return exitCode(exitOutOfCode)
	default:
		return exitCode(code)
	}
}

// readAll reads r to its end, or gives up when ctx is done: a terminal's
// stdin does not end by itself, and Ctrl-C must still work.
func readAll(ctx context.Context, r io.Reader) ([]byte, error) {
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		b, err := io.ReadAll(r)
		done <- result{b, err}
	}()
	select {
	case res := <-done:
		return res.b, res.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
