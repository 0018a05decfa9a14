package cli

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/hutchdev/hutch/client"
)

// Bounds of run's own calls that must finish even after Ctrl-C.
const (
	runCreateTimeout = 2 * time.Minute
	runDeleteTimeout = 15 * time.Second
)

func (a *app) newRunCmd() *cobra.Command {
	var (
		cf createFlags
		ef execFlags
	)
	cmd := &cobra.Command{
		Use:   "run [flags] [--] CMD [ARG...]",
		Short: "Run a command in a new sandbox, then delete it",
		Long: "Create a sandbox, run a command in it streaming its output, and delete the\n" +
			"sandbox, whatever happens. Exits with the command's exit code (124 if it\n" +
			"timed out). Flags go before the command; -e sets the sandbox's environment.",
		Example: "  hutch run -- python3 -c 'print(1+1)'\n  hutch run --template python --timeout 10m -i python3 - < script.py",
		Args:    minArgs(1, "a command"),
		RunE: func(cmd *cobra.Command, args []string) error {
			creq, err := cf.request(a, cmd)
			if err != nil {
				return err
			}
			ereq, err := ef.request(a, cmd, args)
			if err != nil {
				return err
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			return a.runIn(cmd.Context(), c, creq, ereq, ef.timeout)
		},
	}
	// Everything from the command on is the command's, flags included.
	cmd.Flags().SetInterspersed(false)
	cf.register(cmd)
	ef.register(cmd, false)
	// run deletes its sandbox: a kept one is hutch create --key's.
	_ = cmd.Flags().MarkHidden("key")
	cmd.PreRunE = func(cmd *cobra.Command, _ []string) error {
		if cf.key != "" {
			return usageErrorf(cmd, "--key goes with hutch create, whose sandbox stays; run deletes its own")
		}
		return nil
	}
	return cmd
}

// runIn creates a sandbox, runs the command in it and deletes it, also when
// ctx is cancelled (Ctrl-C).
func (a *app) runIn(ctx context.Context, c *client.Client, creq client.CreateSandboxRequest, ereq client.ExecRequest, timeout time.Duration) (err error) {
	// Create even if interrupted meanwhile: once the request is sent the
	// daemon may create the sandbox anyway, and only its ID lets us delete it.
	sb, err := a.createSandbox(ctx, c, creq, runCreateTimeout)
	if err != nil {
		return err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), runDeleteTimeout)
		defer cancel()
		if derr := c.DeleteSandbox(dctx, sb.ID); derr != nil && !client.IsNotFound(derr) {
			a.printError(derr)
			a.printf("hutch: sandbox %s was not deleted; remove it with: hutch rm %s\n", sb.ID, sb.ID)
		}
	}()
	if err := ctx.Err(); err != nil {
		return err
	}
	return a.exec(ctx, c, sb.ID, ereq, timeout)
}
