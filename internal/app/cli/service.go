package cli

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hutchdev/hutch/client"
)

func (a *app) newServiceCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "service",
		Aliases: []string{"svc"},
		Short:   "Start and manage services (web apps) in a sandbox, with their preview URLs",
		Long: "A service is a background process that listens on a port: a Flask app, a Node\n" +
			"server, a Vite dev server. It is starting until its port accepts, then running;\n" +
			"it does not keep its sandbox awake by itself, and a request to its preview wakes a\n" +
			"suspended sandbox and starts it again with the same command.",
	}
	groupCmd(cmd)
	cmd.AddCommand(a.newServiceStartCmd(), a.newServiceLsCmd(), a.newServiceLogsCmd(), a.newServiceEventsCmd(),
		a.newServiceActionCmd("restart", "Stop a service and start it again with the same command (a reload)"),
		a.newServiceActionCmd("stop", "Stop a service; it stays stopped until restarted"),
		a.newServiceLinkCmd(), a.newServiceScreenshotCmd(), a.newServiceRmCmd())
	return cmd
}

func (a *app) newServiceLinkCmd() *cobra.Command {
	var (
		expires time.Duration
		revoke  bool
	)
	cmd := &cobra.Command{
		Use:   "link ID NAME",
		Short: "Print a link that opens a service's preview without the API key, until it expires",
		Long: "Print a link that opens a service's preview without the API key, until it expires.\n" +
			"With --revoke, every link made for the service until now stops working instead;\n" +
			"links made afterwards work.",
		Example: "  hutch service link abc123 web --expires 24h\n" +
			"  hutch service link --revoke abc123 web",
		Args: exactArgs(2, "a sandbox ID and a service name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if revoke && cmd.Flags().Changed("expires") {
				return usageErrorf(cmd, "--revoke makes no link: drop --expires")
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			if revoke {
				return c.RevokeServiceLinks(cmd.Context(), args[0], args[1])
			}
			link, err := c.ServiceLink(cmd.Context(), args[0], args[1], expires)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(link)
			}
			_, err = fmt.Fprintln(a.stdout, link.URL)
			return err
		},
	}
	cmd.Flags().DurationVar(&expires, "expires", time.Hour, "how long the link works (at most 168h)")
	cmd.Flags().BoolVar(&revoke, "revoke", false, "revoke every link made for the service until now")
	return cmd
}

func (a *app) newServiceStartCmd() *cobra.Command {
	var (
		req       client.StartServiceRequest
		env       []string
		noReplace bool
	)
	cmd := &cobra.Command{
		Use:     "start ID --port PORT [flags] -- CMD [ARG...]",
		Short:   "Start a service",
		Example: "  hutch service start abc123 --name web --port 5000 --slot preview -- flask --app app run --port 5000",
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
			req.Env, req.Cmd = envs, args[1:]
			if noReplace {
				req.Replace = new(bool)
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			svc, err := c.StartService(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(svc)
			}
			_, err = fmt.Fprintln(a.stdout, svc.Name)
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&req.Name, "name", "", "the service's `name` (default: the command's, with a suffix)")
	fl.IntVarP(&req.Port, "port", "p", 0, "the `port` it listens on (required)")
	fl.BoolVar(&req.Public, "public", false, "its preview answers without a key or a link")
	fl.StringVar(&req.Slot, "slot", "", "the pane it fills; a service started in slot preview replaces the one before")
	fl.BoolVar(&noReplace, "no-replace", false, "keep the slot's other services")
	fl.StringArrayVarP(&env, "env", "e", nil, "environment variable `K=V` (or K, taken from here); repeatable")
	fl.StringVarP(&req.Cwd, "workdir", "w", "", "working directory (default /home/user/workspace)")
	fl.StringVar(&req.User, "user", "", "run as `user` (the default) or root")
	_ = cmd.MarkFlagRequired("port")
	return cmd
}

func (a *app) newServiceLsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "ls ID",
		Short: "List a sandbox's services and their status",
		Args:  exactArgs(1, "a sandbox ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			all, err := c.ListServices(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(all)
			}
			now := time.Now()
			t := newTable(a.stdout, "NAME", "STATUS", "PORT", "SINCE", "COMMAND")
			for _, svc := range all {
				t.row(svc.Name, serviceStatus(svc), strconv.Itoa(svc.Port), age(now, svc.Since), strings.Join(svc.Cmd, " "))
			}
			return t.flush()
		},
	}
}

// serviceStatus is a service's status with its exit code when it failed.
func serviceStatus(svc client.Service) string {
	if svc.Status == client.ServiceError && svc.ExitCode != nil {
		return fmt.Sprintf("error (exit %d)", *svc.ExitCode)
	}
	return svc.Status
}

func (a *app) newServiceLogsCmd() *cobra.Command {
	logs := a.newProcessLogsCmd()
	logs.Short = "Print a service's latest output (up to 1 MiB)"
	return logs
}

func (a *app) newServiceEventsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "events ID NAME",
		Short: "Print a service's status as it changes, until interrupted",
		Args:  exactArgs(2, "a sandbox ID and a service name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			return c.ServiceEvents(cmd.Context(), args[0], args[1], func(svc client.Service) error {
				if a.jsonOutput() {
					return a.printJSON(svc)
				}
				_, err := fmt.Fprintf(a.stdout, "%s %s\n", svc.Since.Local().Format(time.TimeOnly), serviceStatus(svc))
				if err == nil && svc.Status == client.ServiceError && svc.LogTail != "" {
					_, err = fmt.Fprintln(a.stdout, svc.LogTail)
				}
				return err
			})
		},
	}
}

func (a *app) newServiceActionCmd(action, short string) *cobra.Command {
	return &cobra.Command{
		Use:   action + " ID NAME",
		Short: short,
		Args:  exactArgs(2, "a sandbox ID and a service name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			do := c.RestartService
			if action == "stop" {
				do = c.StopService
			}
			svc, err := do(cmd.Context(), args[0], args[1])
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(svc)
			}
			_, err = fmt.Fprintln(a.stdout, serviceStatus(*svc))
			return err
		},
	}
}

func (a *app) newServiceRmCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "rm ID NAME",
		Short: "Kill a service and forget it",
		Args:  exactArgs(2, "a sandbox ID and a service name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			return c.DeleteService(cmd.Context(), args[0], args[1])
		},
	}
}

func (a *app) newServiceScreenshotCmd() *cobra.Command {
	var (
		req  client.ScreenshotRequest
		out  string
		clip string
	)
	cmd := &cobra.Command{
		Use:   "screenshot ID NAME -o FILE.png",
		Short: "Save a PNG of a service's page, rendered by a browser in a sandbox",
		Long: "The page is rendered by Chromium in the workspace's browser sandbox (made from the\n" +
			"browser template the first time, deleted after 5 idle minutes), which reaches\n" +
			"nothing but the service's sandbox.",
		Example: "  hutch service screenshot abc123 web -o shot.png --full-page\n" +
			"  hutch service screenshot abc123 web -o - --path /chart --clip 0,0,400,300 > chart.png",
		Args: exactArgs(2, "a sandbox ID and a service name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if clip != "" {
				c, err := parseClip(clip)
				if err != nil {
					return usageErrorf(cmd, "%v", err)
				}
				req.Clip = c
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			png, err := c.Screenshot(cmd.Context(), args[0], args[1], req)
			if err != nil {
				return err
			}
			if out == "-" {
				_, err = a.stdout.Write(png)
				return err
			}
			return writeFileAtomic(out, bytes.NewReader(png), 0o644)
		},
	}
	// -o is the file here, not the output format: the output is a picture.
	cmd.Flags().StringVarP(&out, "output", "o", "", "the PNG file to write, - for standard output")
	_ = cmd.MarkFlagRequired("output")
	cmd.Flags().StringVar(&req.Path, "path", "/", "the page's path on the service, with its query")
	cmd.Flags().IntVar(&req.Width, "width", 1280, "the browser window's width, in pixels")
	cmd.Flags().IntVar(&req.Height, "height", 800, "the browser window's height, in pixels")
	cmd.Flags().BoolVar(&req.FullPage, "full-page", false, "take the whole page, beyond the window")
	cmd.Flags().StringVar(&clip, "clip", "", "take only this rectangle of the page: X,Y,W,H in pixels")
	return cmd
}

// parseClip parses X,Y,W,H.
func parseClip(s string) (*client.Clip, error) {
	parts := strings.Split(s, ",")
	var n [4]int
	if len(parts) != len(n) {
		return nil, fmt.Errorf("--clip takes X,Y,W,H, got %q", s)
	}
	for i, p := range parts {
		v, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil {
			return nil, fmt.Errorf("--clip takes X,Y,W,H as whole numbers, got %q", s)
		}
		n[i] = v
	}
	return &client.Clip{X: n[0], Y: n[1], W: n[2], H: n[3]}, nil
}
