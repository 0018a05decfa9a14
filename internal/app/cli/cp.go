package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hutchdev/hutch/client"
)

func (a *app) newCpCmd() *cobra.Command {
	var user string
	cmd := &cobra.Command{
		Use:   "cp SRC DST",
		Short: "Copy a file between here and a sandbox",
		Long: "Copy a file into or out of a sandbox. Exactly one of SRC and DST is ID:PATH, a\n" +
			"path in sandbox ID (absolute, or relative to /home/user/workspace); the other\n" +
			"is a local path, or - for standard input or output. Only files are copied.\n" +
			"When DST is a directory (or ends with /), the file keeps its name there.\n" +
			"A local path containing a colon must contain a slash before it (./a:b).",
		Example: "  hutch cp main.py abc123:src/\n  hutch cp abc123:/tmp/report.csv .\n  tar cz . | hutch cp - abc123:/tmp/src.tgz",
		Args:    exactArgs(2, "SRC and DST"),
		RunE: func(cmd *cobra.Command, args []string) error {
			srcID, srcPath, srcRemote := parseRemote(args[0])
			dstID, dstPath, dstRemote := parseRemote(args[1])
			if srcRemote == dstRemote {
				return usageErrorf(cmd, "exactly one of SRC and DST must be in a sandbox, as ID:PATH")
			}
			var opts []client.FileOption
			if user != "" {
				opts = append(opts, client.AsUser(user))
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			if dstRemote {
				return a.upload(cmd.Context(), c, args[0], dstID, dstPath, opts)
			}
			return a.download(cmd.Context(), c, srcID, srcPath, args[1], opts)
		},
	}
	cmd.Flags().StringVar(&user, "user", "", "access the sandbox's files as `user` (the default) or root")
	return cmd
}

// parseRemote splits "ID:PATH". Something with a slash before its first colon
// is a local path.
func parseRemote(arg string) (id, p string, ok bool) {
	id, p, ok = strings.Cut(arg, ":")
	if !ok || id == "" || strings.ContainsAny(id, `/\`) {
		return "", "", false
	}
	return id, p, true
}

// upload copies local (a file, or - for stdin) to path in sandbox id.
func (a *app) upload(ctx context.Context, c *client.Client, local, id, p string, opts []client.FileOption) error {
	var (
		r    io.Reader
		name string
	)
	if local == "-" {
		r = a.stdin
	} else {
		f, err := os.Open(local) // #nosec G304 -- the user names the file to copy
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		if fi.IsDir() {
			return fmt.Errorf("%s is a directory; hutch cp copies single files", local)
		}
		r, name = f, filepath.Base(local)
	}

	intoDir := p == "" || strings.HasSuffix(p, "/")
	if !intoDir {
		fe, err := c.StatFile(ctx, id, p, opts...)
		switch {
		case err == nil:
			intoDir = fe.Type == client.TypeDir
		case !client.IsNotFound(err):
			return err
		}
	}
	if intoDir {
		if name == "" {
			return fmt.Errorf("%s:%s is a directory; give the file name to write stdin to", id, p)
		}
		p = path.Join(p, name)
	}

	fe, err := c.WriteFile(ctx, id, p, r, opts...)
	if err != nil {
		return err
	}
	if a.jsonOutput() {
		return a.printJSON(fe)
	}
	return nil
}

// download copies path in sandbox id to local (a file or directory, or - for
// stdout). A local file is replaced only once the whole content has arrived.
func (a *app) download(ctx context.Context, c *client.Client, id, p, local string, opts []client.FileOption) error {
	fe, err := c.StatFile(ctx, id, p, opts...)
	if err != nil {
		return err
	}
	if fe.Type == client.TypeDir {
		return fmt.Errorf("%s:%s is a directory; hutch cp copies single files", id, p)
	}
	rc, err := c.ReadFile(ctx, id, p, opts...)
	if err != nil {
		return err
	}
	defer func() { _ = rc.Close() }()

	if local == "-" {
		_, err := io.Copy(a.stdout, rc)
		return err
	}
	target := local
	if fi, err := os.Stat(local); (err == nil && fi.IsDir()) || strings.HasSuffix(local, string(filepath.Separator)) {
		name := fe.Name
		if name == "" {
			name = path.Base(p)
		}
		target = filepath.Join(local, name)
	}
	return writeFileAtomic(target, rc, filePerm(fe.Mode))
}

// filePerm is the permission bits of an API mode like "0755", or 0644.
func filePerm(mode string) os.FileMode {
	m, err := strconv.ParseUint(mode, 8, 32)
	if err != nil {
		return 0o644
	}
	return os.FileMode(m) & os.ModePerm
}

// writeFileAtomic writes r to name through a temporary file renamed into
// place, so an interrupted copy leaves any earlier file untouched.
func writeFileAtomic(name string, r io.Reader, perm os.FileMode) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".hutch-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err := io.Copy(tmp, r); err != nil {
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), name); err != nil {
		var le *os.LinkError
		if errors.As(err, &le) {
			return fmt.Errorf("write %s: %w", name, le.Err)
		}
		return err
	}
	return nil
}
