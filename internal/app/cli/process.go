package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hutchdev/hutch/client"
)

func (a *app) newProcessCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "process",
		Aliases: []string{"ps"},
		Short:   "Start and manage background processes (servers, workers) in a sandbox",
		Long: "Background processes outlive the call that starts them. One that runs keeps its\n" +
			"sandbox awake; one that ran when its sandbox was suspended is started again,\n" +
			"with the same command and env, when the sandbox resumes.",
	}
	groupCmd(cmd)
	cmd.AddCommand(a.newProcessStartCmd(), a.newProcessStdinCmd(), a.newProcessLsCmd(), a.newProcessLogsCmd(),
		a.newProcessKillCmd(), a.newProcessRestartCmd(), a.newProcessRmCmd())
	return cmd
}

func (a *app) newProcessStartCmd() *cobra.Command {
	var (
		name, workdir, user string
		port                int
		env                 []string
		stdin               bool
	)
	cmd := &cobra.Command{
		Use:     "start ID [flags] -- CMD [ARG...]",
		Short:   "Start a background process",
		Example: "  hutch process start abc123 --name web --port 8000 -- python3 -m http.server 8000",
		Args: func(cmd *cobra.Command, args []string) error {
			if dash := cmd.ArgsLenAtDash(); dash != 1 || len(args) < 2 {
				return usageErrorf(cmd, "give the sandbox ID, then -- and the command")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			envs, err := parseEnv(a, cmd, env)
			if err != nil {
				return err
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			p, err := c.StartProcess(cmd.Context(), args[0], client.StartProcessRequest{
				Name: name, Cmd: args[1:], Cwd: workdir, Env: envs, User: user, Port: port, Stdin: stdin,
			})
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(p)
			}
			_, err = fmt.Fprintln(a.stdout, p.Name)
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&name, "name", "", "the process's `name` (default: the command's, with a suffix)")
	fl.IntVar(&port, "port", 0, "the `port` it listens on")
	fl.StringArrayVarP(&env, "env", "e", nil, "environment variable `K=V` (or K, taken from here); repeatable")
	fl.StringVarP(&workdir, "workdir", "w", "", "working directory (default /home/user/workspace)")
	fl.StringVar(&user, "user", "", "run as `user` (the default) or root")
	fl.BoolVar(&stdin, "stdin", false, "keep its stdin open for input (hutch process stdin); else it reads /dev/null")
	return cmd
}

func (a *app) newProcessStdinCmd() *cobra.Command {
	var end bool
	cmd := &cobra.Command{
		Use:   "stdin ID NAME [--close] < INPUT",
		Short: "Write this command's standard input to a background process's stdin (started with --stdin)",
		Args:  exactArgs(2, "a sandbox ID and a process name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			buf := make([]byte, 64<<10)
			for {
				n, rerr := a.stdin.Read(buf)
				if n > 0 {
					if err := c.SendProcessInput(cmd.Context(), args[0], args[1], buf[:n], false); err != nil {
						return err
					}
				}
				if rerr == io.EOF {
					break
				}
				if rerr != nil {
					return rerr
				}
			}
			if end {
				return c.SendProcessInput(cmd.Context(), args[0], args[1], nil, true)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&end, "close", false, "then end its stdin: it reads EOF")
	return cmd
}

func (a *app) newProcessLsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "ls ID",
		Short: "List a sandbox's background processes",
		Args:  exactArgs(1, "a sandbox ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			procs, err := c.ListProcesses(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(procs)
			}
			now := time.Now()
			t := newTable(a.stdout, "NAME", "STATUS", "PID", "PORT", "STARTED", "COMMAND")
			for _, p := range procs {
				pid, port := "-", "-"
				if p.Pid != 0 {
					pid = strconv.FormatUint(uint64(p.Pid), 10)
				}
				if p.Port != 0 {
					port = strconv.Itoa(p.Port)
				}
				t.row(p.Name, p.Status, pid, port, age(now, p.CreatedAt), strings.Join(p.Cmd, " "))
			}
			return t.flush()
		},
	}
}

func (a *app) newProcessLogsCmd() *cobra.Command {
	var follow bool
	cmd := &cobra.Command{
		Use:   "logs ID NAME",
		Short: "Print a background process's latest output (up to 1 MiB)",
		Args:  exactArgs(2, "a sandbox ID and a process name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			return c.ProcessLogs(cmd.Context(), args[0], args[1], follow, func(ev client.ExecEvent) error {
				w := a.stdout
				if ev.Stream == client.Stderr {
					w = a.stderr
				}
				_, err := w.Write(ev.Data)
				return err
			})
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "go on printing what it writes until it exits")
	return cmd
}

func (a *app) newProcessKillCmd() *cobra.Command {
	var signal string
	cmd := &cobra.Command{
		Use:   "kill ID NAME",
		Short: "Send a signal to a background process (KILL ends its whole process tree)",
		Args:  exactArgs(2, "a sandbox ID and a process name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			return c.SignalProcess(cmd.Context(), args[0], args[1], signal)
		},
	}
	cmd.Flags().StringVarP(&signal, "signal", "s", "TERM", "the `signal`: HUP, INT, QUIT, KILL, USR1, USR2 or TERM")
	return cmd
}

func (a *app) newProcessRestartCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "restart ID NAME",
		Short: "Stop a background process (TERM, then KILL after 5s) and start it again",
		Args:  exactArgs(2, "a sandbox ID and a process name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			p, err := c.RestartProcess(cmd.Context(), args[0], args[1])
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(p)
			}
			_, err = fmt.Fprintf(a.stdout, "%s restarted (pid %d)\n", p.Name, p.Pid)
			return err
		},
	}
}

func (a *app) newProcessRmCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "rm ID NAME...",
		Short: "Kill background processes and forget them",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				return usageErrorf(cmd, "give a sandbox ID and process names")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			for _, name := range args[1:] {
				if err := c.DeleteProcess(cmd.Context(), args[0], name); err != nil {
					return err
				}
			}
			return nil
		},
	}
}
