package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/hutchdev/hutch/client"
)

// fsFlags are the flags all fs subcommands share.
type fsFlags struct {
	user string
}

func (f *fsFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.user, "user", "", "access the files as `user` (the default) or root")
}

func (f *fsFlags) opts() []client.FileOption {
	if f.user == "" {
		return nil
	}
	return []client.FileOption{client.AsUser(f.user)}
}

func (a *app) newFsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "fs",
		Short: "Work with the files of a sandbox",
		Long: "Work with the files of a sandbox. Paths are absolute, or relative to\n" +
			"/home/user/workspace.",
	}
	groupCmd(cmd)
	cmd.AddCommand(a.newFsLsCmd(), a.newFsCatCmd(), a.newFsRmCmd(), a.newFsMkdirCmd(), a.newFsMvCmd(), a.newFsUploadCmd(), a.newFsWatchCmd())
	return cmd
}

func (a *app) newFsLsCmd() *cobra.Command {
	var (
		f     fsFlags
		depth int
	)
	cmd := &cobra.Command{
		Use:   "ls ID [PATH]",
		Short: "List a directory (default: the workspace)",
		Args:  rangeArgs(1, 2, "a sandbox ID and an optional path"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if depth < 1 {
				return usageErrorf(cmd, "--depth must be at least 1")
			}
			p := "."
			if len(args) == 2 {
				p = args[1]
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			entries, err := c.ListFiles(cmd.Context(), args[0], p, depth, f.opts()...)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				if entries == nil {
					entries = []client.FileEntry{}
				}
				return a.printJSON(entries)
			}
			t := newTable(a.stdout, "TYPE", "SIZE", "MODIFIED", "PATH")
			for _, e := range entries {
				name := e.Path
				if e.SymlinkTarget != "" {
					name += " -> " + e.SymlinkTarget
				}
				t.row(e.Type, strconv.FormatInt(e.Size, 10), e.ModifiedAt.Local().Format(time.DateTime), name)
			}
			return t.flush()
		},
	}
	f.register(cmd)
	cmd.Flags().IntVar(&depth, "depth", 1, "how many levels to descend")
	return cmd
}

func (a *app) newFsCatCmd() *cobra.Command {
	var f fsFlags
	cmd := &cobra.Command{
		Use:   "cat ID PATH...",
		Short: "Print files",
		Args:  minArgs(2, "a sandbox ID and one or more paths"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			for _, p := range args[1:] {
				rc, err := c.ReadFile(cmd.Context(), args[0], p, f.opts()...)
				if err != nil {
					return err
				}
				_, err = io.Copy(a.stdout, rc)
				_ = rc.Close()
				if err != nil {
					return err
				}
			}
			return nil
		},
	}
	f.register(cmd)
	return cmd
}

// eachPath runs op on every path, reporting each failure and going on with the
// rest; the exit code is 1 if any failed.
func (a *app) eachPath(cmd *cobra.Command, paths []string, op func(p string) error) error {
	failed := false
	for _, p := range paths {
		err := op(p)
		switch {
		case err == nil:
		case isConnectError(err) || cmd.Context().Err() != nil:
			return err
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

func (a *app) newFsRmCmd() *cobra.Command {
	var f fsFlags
	cmd := &cobra.Command{
		Use:   "rm ID PATH...",
		Short: "Delete files and directories (with their content)",
		Args:  minArgs(2, "a sandbox ID and one or more paths"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			return a.eachPath(cmd, args[1:], func(p string) error {
				return c.DeleteFile(cmd.Context(), args[0], p, f.opts()...)
			})
		},
	}
	f.register(cmd)
	return cmd
}

func (a *app) newFsMkdirCmd() *cobra.Command {
	var f fsFlags
	cmd := &cobra.Command{
		Use:   "mkdir ID PATH...",
		Short: "Create directories (and their parents)",
		Args:  minArgs(2, "a sandbox ID and one or more paths"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			var made []*client.FileEntry
			err = a.eachPath(cmd, args[1:], func(p string) error {
				fe, err := c.MakeDir(cmd.Context(), args[0], p, f.opts()...)
				if err == nil {
					made = append(made, fe)
				}
				return err
			})
			if a.jsonOutput() && len(made) > 0 {
				if perr := a.printJSON(made); perr != nil && err == nil {
					err = perr
				}
			}
			return err
		},
	}
	f.register(cmd)
	return cmd
}

func (a *app) newFsMvCmd() *cobra.Command {
	var f fsFlags
	cmd := &cobra.Command{
		Use:   "mv ID SRC DST",
		Short: "Move or rename a file or directory",
		Args:  exactArgs(3, "a sandbox ID, a source and a destination"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			fe, err := c.MoveFile(cmd.Context(), args[0], args[1], args[2], f.opts()...)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(fe)
			}
			return nil
		},
	}
	f.register(cmd)
	return cmd
}

func (a *app) newFsUploadCmd() *cobra.Command {
	var f fsFlags
	cmd := &cobra.Command{
		Use:   "upload ID FILE...",
		Short: "Upload local files into the sandbox's " + client.UploadDir,
		Long: "Upload local files, each by its own name, into " + client.UploadDir + "\n" +
			"in one request: if one fails, none is left. (hutch cp copies one file\n" +
			"to a path of your choosing.)",
		Args: minArgs(2, "a sandbox ID and one or more local files"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			var files []client.Upload
			for _, name := range args[1:] {
				// #nosec G304 -- the caller's own file, named on their command line
				fh, err := os.Open(name)
				if err != nil {
					return err
				}
				defer fh.Close()
				files = append(files, client.Upload{Name: filepath.Base(name), Content: fh})
			}
			entries, err := c.Upload(cmd.Context(), args[0], files, f.opts()...)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(entries)
			}
			for _, e := range entries {
				if _, err := fmt.Fprintln(a.stdout, e.Path); err != nil {
					return err
				}
			}
			return nil
		},
	}
	f.register(cmd)
	return cmd
}

func (a *app) newFsWatchCmd() *cobra.Command {
	var (
		f         fsFlags
		recursive bool
	)
	cmd := &cobra.Command{
		Use:   "watch ID [PATH] [-r]",
		Short: "Print the changes under a directory as they happen (default: the workspace), until interrupted",
		Args:  rangeArgs(1, 2, "a sandbox ID and an optional path"),
		RunE: func(cmd *cobra.Command, args []string) error {
			p := "."
			if len(args) == 2 {
				p = args[1]
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			return c.WatchFiles(cmd.Context(), args[0], p, recursive, func(ev client.FileEvent) error {
				if a.jsonOutput() {
					b, err := json.Marshal(ev)
					if err != nil {
						return err
					}
					_, err = fmt.Fprintf(a.stdout, "%s\n", b)
					return err
				}
				_, err := fmt.Fprintf(a.stdout, "%-8s %s\n", ev.Op, ev.Path)
				return err
			}, f.opts()...)
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVarP(&recursive, "recursive", "r", false, "watch subdirectories too")
	return cmd
}
