package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/spf13/cobra"
)

func (a *app) newRmCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "rm ID...",
		Aliases: []string{"delete"},
		Short:   "Delete sandboxes",
		Long:    "Delete each sandbox, printing its ID once deleted. Failures are reported and\nmake the exit code 1; the other sandboxes are still deleted.",
		Args:    minArgs(1, "one or more sandbox IDs"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			return a.forEach(cmd, args, c.DeleteSandbox)
		},
	}
}

func (a *app) newPauseCmd() *cobra.Command {
	return a.newSandboxActionCmd("pause", "Freeze sandboxes",
		"Freeze each sandbox, printing its ID: its processes keep their memory and\n"+
			"get no CPU. The next exec or file call thaws it, as does hutch unpause.",
		(*client.Client).PauseSandbox)
}

func (a *app) newUnpauseCmd() *cobra.Command {
	return a.newSandboxActionCmd("unpause", "Thaw paused sandboxes",
		"Thaw each paused sandbox, printing its ID.", (*client.Client).UnpauseSandbox)
}

func (a *app) newSuspendCmd() *cobra.Command {
	return a.newSandboxActionCmd("suspend", "Stop sandboxes, keeping their files",
		"Suspend each sandbox, printing its ID: it uses no memory and no CPU, its\n"+
			"files are kept, and under gVisor its memory and processes too (under runc\n"+
			"they are gone). The next exec or file call resumes it, as does hutch resume.",
		(*client.Client).SuspendSandbox)
}

func (a *app) newStopCmd() *cobra.Command {
	return a.newSandboxActionCmd("stop", "Stop sandboxes, keeping their files only",
		"Stop each sandbox, printing its ID: its processes end (under gVisor too),\n"+
			"its files are kept. Unlike a suspended sandbox, a stopped one is not woken\n"+
			"by calls: hutch start starts it, with the background processes that ran.",
		(*client.Client).StopSandbox)
}

func (a *app) newResumeCmd() *cobra.Command {
	cmd := a.newSandboxActionCmd("resume", "Start suspended, stopped or failed sandboxes again",
		"Resume each suspended, stopped or failed (state error) sandbox, printing its\n"+
			"ID: it starts again on its files. (hutch start is the same.)",
		(*client.Client).ResumeSandbox)
	cmd.Aliases = []string{"start"}
	return cmd
}

func (a *app) newKeepaliveCmd() *cobra.Command {
	var (
		timeout, lifetime time.Duration
		action            string
	)
	cmd := &cobra.Command{
		Use:   "keepalive ID... --idle-timeout D | --max-lifetime D",
		Short: "Set sandboxes' idle timeout or max lifetime, from now",
		Long: "Set each sandbox's idle timeout, counted from now, printing its ID: a\n" +
			"keepalive for a sandbox an agent will come back to. --idle-action changes\n" +
			"what the timeout does (suspend, stop or delete). --max-lifetime moves the\n" +
			"time the sandbox is deleted at, running or not, to that long from now.",
		Example: "  hutch keepalive abc123 --idle-timeout 2h\n  hutch keepalive abc123 --max-lifetime 720h",
		Args:    minArgs(1, "one or more sandbox IDs"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if timeout == 0 && lifetime == 0 {
				return usageErrorf(cmd, "give --idle-timeout, --max-lifetime or both")
			}
			if (timeout != 0 && timeout < time.Second) || (lifetime != 0 && lifetime < time.Second) {
				return usageErrorf(cmd, "--idle-timeout and --max-lifetime must be at least 1s")
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			req := client.UpdateSandboxRequest{IdleTimeoutS: seconds(timeout), IdleAction: action, MaxLifetimeS: seconds(lifetime)}
			return a.forEach(cmd, args, func(ctx context.Context, id string) error {
				_, err := c.UpdateSandbox(ctx, id, req)
				return err
			})
		},
	}
	cmd.Flags().DurationVar(&timeout, "idle-timeout", 0, "the new idle timeout, from now")
	cmd.Flags().DurationVar(&lifetime, "max-lifetime", 0, "delete the sandbox this long from now")
	cmd.Flags().StringVar(&action, "idle-action", "", "suspend, stop or delete (default: unchanged)")
	return cmd
}

func (a *app) newUpdateCmd() *cobra.Command {
	var (
		cpus                   float64
		memoryMB, pids, diskMB int64
		envFlags, metas        []string
	)
	cmd := &cobra.Command{
		Use:   "update ID [--cpus N] [--memory MiB] [--pids N] [--disk MiB] [-e K=V]... [--meta k=v]...",
		Short: "Change a sandbox's limits, env or metadata",
		Long: "Change a sandbox's limits: a running one's in place where its runtime can\n" +
			"(the CPUs under both; memory and processes under runc), a suspended or stopped\n" +
			"one's for its next start; its disk grows in place, running or not (it never\n" +
			"shrinks). -e replaces its environment (its next command sees it), --meta its\n" +
			"metadata. Prints the sandbox's ID.",
		Example: "  hutch update abc123 --cpus 2 --memory 2048\n  hutch update abc123 -e STAGE=two",
		Args:    exactArgs(1, "a sandbox ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			env, err := parseEnv(a, cmd, envFlags)
			if err != nil {
				return err
			}
			meta, err := parsePairs(cmd, "--meta", metas)
			if err != nil {
				return err
			}
			req := client.UpdateSandboxRequest{CPUs: cpus, MemoryMB: memoryMB, Pids: pids, DiskMB: diskMB, Env: env, Metadata: meta}
			if req.CPUs == 0 && req.MemoryMB == 0 && req.Pids == 0 && req.DiskMB == 0 && env == nil && meta == nil {
				return usageErrorf(cmd, "give --cpus, --memory, --pids, --disk, -e or --meta")
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			sb, err := c.UpdateSandbox(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(sb)
			}
			_, err = fmt.Fprintln(a.stdout, sb.ID)
			return err
		},
	}
	fl := cmd.Flags()
	fl.Float64Var(&cpus, "cpus", 0, "its CPU limit")
	fl.Int64Var(&memoryMB, "memory", 0, "its memory limit in MiB")
	fl.Int64Var(&pids, "pids", 0, "its process limit")
	fl.Int64Var(&diskMB, "disk", 0, "its disk's size in MiB: larger than it is")
	fl.StringArrayVarP(&envFlags, "env", "e", nil, "environment variable `K=V` (or K, taken from here), replacing its environment; repeatable")
	fl.StringArrayVar(&metas, "meta", nil, "metadata `k=v`, replacing its metadata; repeatable")
	return cmd
}

// newSandboxActionCmd is a command that does act to each sandbox named.
func (a *app) newSandboxActionCmd(name, short, long string, act func(*client.Client, context.Context, string) (*client.Sandbox, error)) *cobra.Command {
	return &cobra.Command{
		Use:   name + " ID...",
		Short: short,
		Long:  long,
		Args:  minArgs(1, "one or more sandbox IDs"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			return a.forEach(cmd, args, func(ctx context.Context, id string) error {
				_, err := act(c, ctx, id)
				return err
			})
		},
	}
}

// forEach does do to each of names, printing each name once done. A failure
// is reported and makes the exit code 1; the others are still done, unless
// the daemon cannot be reached at all.
func (a *app) forEach(cmd *cobra.Command, names []string, do func(context.Context, string) error) error {
	failed := false
	for _, name := range names {
		err := do(cmd.Context(), name)
		switch {
		case err == nil:
			if _, err := fmt.Fprintln(a.stdout, name); err != nil {
				return err
			}
		case isConnectError(err) || cmd.Context().Err() != nil:
			return err // the rest would fail the same way
		default:
			a.printError(err)
			failed = true
		}
	}
	if failed {
		return exitCode(exitError)
	}
	return nil
}
