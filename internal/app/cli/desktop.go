package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hutchdev/hutch/client"
)

func (a *app) newDesktopCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "desktop",
		Short: "Start, watch and drive a sandbox's Linux desktop (template desktop)",
		Long: "A sandbox made from template desktop has a Linux desktop (Xfce on a virtual\n" +
			"screen): hutch desktop start shows it, screenshot saves a PNG of it, act does\n" +
			"mouse and keyboard actions on it, stream makes a link to watch it (or drive it)\n" +
			"in a browser.",
	}
	groupCmd(cmd)
	var width, height int
	start := &cobra.Command{
		Use:   "start ID [--width W --height H]",
		Short: "Start a sandbox's desktop (default 1024x768) and wait until it shows",
		Args:  exactArgs(1, "a sandbox ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			d, err := c.StartDesktop(cmd.Context(), args[0], client.DesktopRequest{Width: width, Height: height})
			if err != nil {
				return err
			}
			return a.printDesktop(d)
		},
	}
	start.Flags().IntVar(&width, "width", 0, "the screen's width in pixels (default 1024)")
	start.Flags().IntVar(&height, "height", 0, "the screen's height in pixels (default 768)")
	status := &cobra.Command{
		Use:   "status ID",
		Short: "Show a sandbox's desktop: its size, the pointer, the latest actions",
		Args:  exactArgs(1, "a sandbox ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			d, err := c.Desktop(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.printDesktop(d)
		},
	}
	stop := &cobra.Command{
		Use:   "stop ID",
		Short: "End a sandbox's desktop, its windows with it",
		Args:  exactArgs(1, "a sandbox ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			return c.StopDesktop(cmd.Context(), args[0])
		},
	}
	var out string
	var scale float64
	screenshot := &cobra.Command{
		Use:   "screenshot ID [-o FILE] [--scale F]",
		Short: "Save a PNG of a sandbox's screen (default: screenshot.png)",
		Args:  exactArgs(1, "a sandbox ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			png, err := c.DesktopScreenshot(cmd.Context(), args[0], client.DesktopShot{Scale: scale})
			if err != nil {
				return err
			}
			if out == "-" {
				_, err = a.stdout.Write(png)
				return err
			}
			return os.WriteFile(out, png, 0o644) // #nosec G306 -- a picture the user asked for
		},
	}
	screenshot.Flags().StringVarP(&out, "output", "o", "screenshot.png", "where to write it (- for stdout)")
	screenshot.Flags().Float64Var(&scale, "scale", 0, "shrink it by this factor (0 < F ≤ 1)")
	var shot bool
	act := &cobra.Command{
		Use:   "act ID ACTION...",
		Short: "Do actions on a sandbox's desktop, in order",
		Long: "Each ACTION is one of:\n" +
			"  move X Y | click X Y | double_click X Y | right_click X Y\n" +
			"  type TEXT | key KEYS (ctrl+a, Return, alt+F4) | scroll up|down|left|right\n" +
			"  wait MS | drag X1 Y1 X2 Y2\n" +
			"or, to give one as the API takes it, a JSON object ({\"type\": \"click\", \"x\": 10, \"y\": 20}).\n\n" +
			"  hutch desktop act ID click 300 220 type hello key Return",
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			actions, err := parseActions(args[1:])
			if err != nil {
				return usageErrorf(cmd, "%v", err)
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			req := client.DesktopActionsRequest{Actions: actions}
			if shot {
				req.Screenshot = &client.DesktopShot{}
			}
			res, err := c.DesktopActions(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			if shot {
				if err := os.WriteFile(out, res.Screenshot, 0o644); err != nil { // #nosec G306 -- a picture the user asked for
					return err
				}
			}
			if a.jsonOutput() {
				return a.printJSON(res.Cursor)
			}
			_, err = fmt.Fprintf(a.stdout, "pointer at %d,%d\n", res.Cursor.X, res.Cursor.Y)
			return err
		},
	}
	act.Flags().BoolVar(&shot, "screenshot", false, "save a screenshot taken after the actions (-o, default screenshot.png)")
	act.Flags().StringVarP(&out, "output", "o", "screenshot.png", "where --screenshot writes it")
	var control bool
	stream := &cobra.Command{
		Use:   "stream ID [--control]",
		Short: "Print a link to watch a sandbox's desktop live in a browser (view-only unless --control)",
		Args:  exactArgs(1, "a sandbox ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			s, err := c.DesktopStream(cmd.Context(), args[0], client.DesktopStreamRequest{Control: control})
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(s)
			}
			_, err = fmt.Fprintln(a.stdout, s.URL)
			return err
		},
	}
	stream.Flags().BoolVar(&control, "control", false, "a link that drives the desktop too")
	cmd.AddCommand(start, status, stop, screenshot, act, stream)
	return cmd
}

func (a *app) printDesktop(d client.Desktop) error {
	if a.jsonOutput() {
		return a.printJSON(d)
	}
	if !d.Running {
		_, err := fmt.Fprintln(a.stdout, "not running")
		return err
	}
	fmt.Fprintf(a.stdout, "running at %dx%d, pointer at %d,%d\n", d.Width, d.Height, d.Cursor.X, d.Cursor.Y)
	for _, e := range d.Recent {
		fmt.Fprintf(a.stdout, "  %s  %s\n", e.Time.Local().Format("15:04:05"), e.Action)
	}
	return nil
}

// parseActions reads act's words: each action's name, then its
// arguments, or a JSON object.
func parseActions(words []string) ([]client.DesktopAction, error) {
	var out []client.DesktopAction
	ints := func(i, n int) ([]int, error) {
		if i+n >= len(words) {
			return nil, fmt.Errorf("%s takes %d numbers", words[i], n)
		}
		v := make([]int, n)
		for k := range n {
			if _, err := fmt.Sscanf(words[i+1+k], "%d", &v[k]); err != nil {
				return nil, fmt.Errorf("%s: %q is not a number", words[i], words[i+1+k])
			}
		}
		return v, nil
	}
	for i := 0; i < len(words); i++ {
		w := words[i]
		var a client.DesktopAction
		switch w {
		case "move", "click", "double_click", "triple_click", "right_click":
			v, err := ints(i, 2)
			if err != nil {
				return nil, err
			}
			a = client.DesktopAction{Type: w, X: client.At(v[0]), Y: client.At(v[1])}
			if w == "right_click" {
				a.Type, a.Button = "click", "right"
			}
			i += 2
		case "drag":
			v, err := ints(i, 4)
			if err != nil {
				return nil, err
			}
			a = client.DesktopAction{Type: w, Path: []client.Point{{X: v[0], Y: v[1]}, {X: v[2], Y: v[3]}}}
			i += 4
		case "wait":
			v, err := ints(i, 1)
			if err != nil {
				return nil, err
			}
			a = client.DesktopAction{Type: w, Ms: v[0]}
			i++
		case "type", "key", "scroll":
			if i+1 >= len(words) {
				return nil, fmt.Errorf("%s takes a word", w)
			}
			a = client.DesktopAction{Type: w}
			switch w {
			case "type":
				a.Text = words[i+1]
			case "key":
				a.Keys = words[i+1]
			default:
				a.Direction = words[i+1]
			}
			i++
		default:
			if !strings.HasPrefix(w, "{") {
				return nil, fmt.Errorf("%q is not an action (move, click, double_click, right_click, drag, scroll, type, key, wait, or a JSON object)", w)
			}
			if err := json.Unmarshal([]byte(w), &a); err != nil {
				return nil, fmt.Errorf("%s: %v", w, err)
			}
		}
		out = append(out, a)
	}
	return out, nil
}
