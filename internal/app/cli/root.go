// Package cli is the hutch command line. Commands are thin: they parse flags,
// call the daemon through the client package and print to the writers they
// are given.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/agent"
)

// Exit codes of the hutch command itself; exec and run exit with the
// command's own code.
const (
	exitError       = 1
	exitUsage       = 2
	exitInterrupted = 130
)

// Main runs the hutch command line with args (without the program name) and
// returns the process's exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	// hutch agent is the agent's command line (agent.Main), for a hutch
	// built without the agent's own binary embedded (go build rather than
	// make build), whose daemon then runs itself as every sandbox's agent.
	// It is not for people, so it is not in the command tree, and it is
	// parsed before the tree is built: building it cost the agent's start
	// 0.7 ms.
	if len(args) > 0 && args[0] == "agent" {
		return agent.Main(ctx, args[1:], stderr)
	}
	a := &app{
		stdin:     os.Stdin,
		stdout:    stdout,
		stderr:    stderr,
		lookupEnv: os.LookupEnv,
		newClient: func() (*client.Client, error) { return client.FromEnv(client.WithUserAgent("hutch-cli")) },
		now:       time.Now,
	}
	return a.run(ctx, args)
}

// app is what the commands share: their I/O, how they reach the daemon, and
// the global flags.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	lookupEnv      func(string) (string, bool)
	newClient      func() (*client.Client, error)
	now            func() time.Time

	output string // --output
}

func (a *app) run(ctx context.Context, args []string) int {
	root := a.newRootCmd()
	root.SetArgs(args)
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	return a.report(ctx, err)
}

func (a *app) newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "hutch",
		Short: "Sandboxes for AI agents",
		Long: "Hutch runs isolated Linux sandboxes for AI agents.\n\n" +
			"The commands talk to the daemon (hutch serve) at $HUTCH_URL, else the unix\n" +
			"socket " + client.DefaultSocket + ", else " + client.DefaultURL + ", with the key\n" +
			"in $HUTCH_API_KEY or " + client.DefaultDataDir + "/api.key.",
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if a.output != "table" && a.output != "json" {
				return usageErrorf(cmd, "--output must be table or json, not %q", a.output)
			}
			return nil
		},
	}
	groupCmd(root)
	root.PersistentFlags().StringVarP(&a.output, "output", "o", "table", "output format: table or json")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return &usageError{cmd: cmd, err: err}
	})
	root.AddCommand(
		a.newCreateCmd(),
		a.newLsCmd(),
		a.newInspectCmd(),
		a.newStatsCmd(),
		a.newExecCmd(),
		a.newRunCmd(),
		a.newRmCmd(),
		a.newPauseCmd(),
		a.newUnpauseCmd(),
		a.newSuspendCmd(),
		a.newStopCmd(),
		a.newResumeCmd(),
		a.newKeepaliveCmd(),
		a.newUpdateCmd(),
		a.newProcessCmd(),
		a.newServiceCmd(),
		a.newContextCmd(),
		a.newE2BCmd(),
		a.newSnapshotCmd(),
		a.newCheckpointCmd(),
		a.newDesktopCmd(),
		a.newForkCmd(),
		a.newVolumeCmd(),
		a.newNetworkCmd(),
		a.newCpCmd(),
		a.newFsCmd(),
		a.newTemplateCmd(),
		a.newToolCmd(),
		a.newMCPCmd(),
		a.newKeyCmd(),
		a.newSecretCmd(),
		a.newWorkspaceCmd(),
		a.newAuditCmd(),
		a.newHealthCmd(),
		a.newNodeCmd(),
		newServeCmd(),
	)
	return root
}

// groupCmd makes cmd, a command that only holds subcommands, print its help
// when called alone and fail with a usage error on an unknown subcommand.
func groupCmd(cmd *cobra.Command) {
	cmd.SuggestionsMinimumDistance = 2
	cmd.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "; did you mean " + strings.Join(s, " or ") + "?"
		}
		return &usageError{cmd: cmd, err: errors.New(msg)}
	}
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
}

// connect returns a client for the daemon.
func (a *app) connect() (*client.Client, error) {
	return a.newClient()
}

// usageError is a mistake in how hutch was called: exit code 2.
type usageError struct {
	cmd *cobra.Command // for the help hint; may be nil
	err error
}

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usageErrorf(cmd *cobra.Command, format string, args ...any) error {
	return &usageError{cmd: cmd, err: fmt.Errorf(format, args...)}
}

// Argument validators that report usage errors.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageErrorf(cmd, "%q takes %s", cmd.CommandPath(), what)
		}
		return nil
	}
}

func minArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < n {
			return usageErrorf(cmd, "%q takes %s", cmd.CommandPath(), what)
		}
		return nil
	}
}

func rangeArgs(min, max int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < min || len(args) > max {
			return usageErrorf(cmd, "%q takes %s", cmd.CommandPath(), what)
		}
		return nil
	}
}

// exitCode is an error that only carries the exit code: whatever there was to
// say has been printed.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// report prints err as the user should see it and returns the exit code.
func (a *app) report(ctx context.Context, err error) int {
	var code exitCode
	if errors.As(err, &code) {
		return int(code)
	}
	var ue *usageError
	if errors.As(err, &ue) {
		a.printf("hutch: %s\n", ue.err)
		if ue.cmd != nil {
			a.printf("Run '%s --help' for usage.\n", ue.cmd.CommandPath())
		}
		return exitUsage
	}
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		a.printf("hutch: interrupted\n")
		return exitInterrupted
	}
	a.printError(err)
	return exitError
}

// printError prints "hutch: <message>" and, when there is an obvious next
// step, a hint.
func (a *app) printError(err error) {
	a.printf("hutch: %s\n", message(err))
	switch {
	case isConnectError(err) && errors.Is(err, syscall.EACCES):
		a.printf("hutch: the daemon's socket is for root; run as root, or set HUTCH_URL and HUTCH_API_KEY\n")
	case isConnectError(err):
		a.printf("hutch: is the daemon running? start it with: hutch serve\n")
	case client.IsUnauthenticated(err):
		a.printf("hutch: set HUTCH_API_KEY to the daemon's key (see %s/api.key)\n", client.DefaultDataDir)
	}
}

// message is err's text without the "Get http://…:" prefix of transport
// errors.
func message(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}

// isConnectError reports whether err is a failure to reach the daemon at all.
func isConnectError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
