package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hutchdev/hutch/client"
)

func (a *app) newContextCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "context",
		Aliases: []string{"ctx"},
		Short:   "Run code in stateful code contexts (Jupyter kernels) of a sandbox",
		Long: "A code context is a kernel in the sandbox where variables, imports and the working\n" +
			"directory persist from one run to the next, as in a notebook: Python on ipykernel\n" +
			"(the python template has it, with numpy, pandas and matplotlib), JavaScript and\n" +
			"TypeScript on Deno's kernel, and bash.",
		Example: "  id=$(hutch context create abc123 --language python)\n" +
			"  hutch context run abc123 $id 'import pandas as pd; df = pd.DataFrame({\"a\": [1, 2]})'\n" +
			"  hutch context run abc123 $id 'df.a.sum()'",
	}
	groupCmd(cmd)
	cmd.AddCommand(a.newContextCreateCmd(), a.newContextLsCmd(), a.newContextRunCmd(), a.newContextRestartCmd(), a.newContextRmCmd())
	return cmd
}

func (a *app) newContextCreateCmd() *cobra.Command {
	var (
		req client.CreateContextRequest
		env []string
	)
	cmd := &cobra.Command{
		Use:   "create ID [--language LANG]",
		Short: "Start a code context and print its id",
		Args:  exactArgs(1, "a sandbox ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			envs, err := parseEnv(a, cmd, env)
			if err != nil {
				return err
			}
			req.Env = envs
			c, err := a.connect()
			if err != nil {
				return err
			}
			ctx, err := c.CreateContext(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(ctx)
			}
			_, err = fmt.Fprintln(a.stdout, ctx.ID)
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&req.Language, "language", "l", "python", "python, javascript, typescript or bash")
	fl.StringVarP(&req.Cwd, "workdir", "w", "", "working directory (default /home/user/workspace)")
	fl.StringArrayVarP(&env, "env", "e", nil, "environment variable `K=V` (or K, taken from here); repeatable")
	fl.StringVar(&req.User, "user", "", "run the kernel as `user` (the default) or root")
	return cmd
}

func (a *app) newContextLsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "ls ID",
		Short: "List a sandbox's code contexts",
		Args:  exactArgs(1, "a sandbox ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			list, err := c.ListContexts(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(list)
			}
			t := newTable(a.stdout, "ID", "LANGUAGE", "USER", "CWD")
			for _, ctx := range list {
				t.row(ctx.ID, ctx.Language, ctx.User, ctx.Cwd)
			}
			return t.flush()
		},
	}
}

func (a *app) newContextRunCmd() *cobra.Command {
	var (
		timeout time.Duration
		saveDir string
	)
	cmd := &cobra.Command{
		Use:   "run ID CONTEXT [CODE | -]",
		Short: "Run code in a context, printing its output and results (code from stdin with - or none)",
		Long: "Prints stdout and stderr as they come, then each result as text (an image as a\n" +
			"line naming it, saved in --save-images), then the files the code wrote. An error\n" +
			"prints its traceback and exits 1; code still running at --timeout is interrupted,\n" +
			"the context keeping its state, and exits 124.",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 || len(args) > 3 {
				return usageErrorf(cmd, "give the sandbox ID, the context's id and the code (or - to read it from stdin)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			code := ""
			if len(args) == 3 && args[2] != "-" {
				code = args[2]
			} else {
				b, err := io.ReadAll(a.stdin)
				if err != nil {
					return err
				}
				code = string(b)
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			images := 0
			var failed *client.CodeError
			end, err := c.RunInContextStream(cmd.Context(), args[0], client.CodeRequest{
				ContextID: args[1], Code: code, TimeoutS: int64(timeout.Seconds()),
			}, func(ev client.CodeEvent) error {
				switch {
				case ev.Result != nil:
					return a.printCodeResult(*ev.Result, saveDir, &images)
				case ev.Error != nil:
					failed = ev.Error
					return nil
				case ev.Stderr != "":
					_, err := io.WriteString(a.stderr, ev.Stderr)
					return err
				default:
					_, err := io.WriteString(a.stdout, ev.Stdout)
					return err
				}
			})
			if err != nil {
				return err
			}
			for _, f := range end.Files {
				a.printf("wrote %s %s\n", f.Path, f.DownloadURL)
			}
			if end.Restarted {
				a.printf("hutch: the context's kernel was restarted: its state is gone\n")
			}
			switch {
			case end.TimedOut:
				a.printf("hutch: interrupted at the timeout (%s)\n", timeout)
				return exitCode(exitTimedOut)
			case failed != nil:
				if len(failed.Traceback) > 0 {
					a.printf("%s\n", strings.Join(failed.Traceback, "\n"))
				} else {
					a.printf("%s: %s\n", failed.Name, failed.Value)
				}
				return exitCode(1)
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "interrupt the code after this long (at most 30m)")
	cmd.Flags().StringVar(&saveDir, "save-images", "", "save images the code shows in this `directory` (image-1.png, …)")
	return cmd
}

// printCodeResult prints a result as text: its text/plain, or for an
// image a line naming it, the image saved in dir when given.
func (a *app) printCodeResult(r client.CodeResult, dir string, images *int) error {
	for _, mt := range []string{"image/png", "image/jpeg"} {
		img, err := r.Image(mt)
		if err != nil || img == nil {
			continue
		}
		*images++
		if dir == "" {
			_, err := fmt.Fprintf(a.stdout, "[%s, %d bytes: --save-images DIR saves it]\n", mt, len(img))
			return err
		}
		name := filepath.Join(dir, fmt.Sprintf("image-%d.%s", *images, strings.TrimPrefix(mt, "image/")))
		if err := os.WriteFile(name, img, 0o600); err != nil {
			return err
		}
		_, err = fmt.Fprintf(a.stdout, "[%s saved to %s]\n", mt, name)
		return err
	}
	if text := r.Text("text/plain"); text != "" {
		_, err := fmt.Fprintln(a.stdout, text)
		return err
	}
	return nil
}

func (a *app) newContextRestartCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "restart ID CONTEXT",
		Short: "Give a context a new kernel (its state is gone)",
		Args:  exactArgs(2, "a sandbox ID and a context's id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			_, err = c.RestartContext(cmd.Context(), args[0], args[1])
			return err
		},
	}
}

func (a *app) newContextRmCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "rm ID CONTEXT",
		Short: "End a context and its kernel",
		Args:  exactArgs(2, "a sandbox ID and a context's id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			return c.DeleteContext(cmd.Context(), args[0], args[1])
		},
	}
}
