package cli

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
)

func (a *app) newTemplateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "template",
		Aliases: []string{"templates"},
		Short:   "Work with the templates sandboxes are made from",
	}
	groupCmd(cmd)
	cmd.AddCommand(a.newTemplateLsCmd(), a.newTemplateRmCmd(), a.newTemplateBuildCmd(), a.newTemplatePullCmd(), a.newTemplateImportCmd())
	return cmd
}

func (a *app) newTemplateLsCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List templates",
		Args:    exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			list, err := c.ListTemplates(cmd.Context())
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(list)
			}
			t := newTable(a.stdout, "NAME", "SOURCE", "VERSION", "SIZE", "SANDBOXES", "AGE", "FROM")
			now := a.now()
			for _, tm := range list {
				t.row(tm.Name, tm.Source, tm.Version, humanBytes(tm.SizeBytes), fmt.Sprint(tm.Sandboxes),
					age(now, tm.Created), orDash(madeFrom(tm)))
			}
			if err := t.flush(); err != nil {
				return err
			}
			// Builds under way, after the table: a template being built
			// for the first time is in no row yet.
			if h, err := c.Health(cmd.Context()); err == nil {
				for _, b := range h.Builds {
					_, _ = fmt.Fprintf(a.stdout, "building %s: %s\n", b.Template, b.Description)
				}
			}
			return nil
		},
	}
}

func (a *app) newTemplateRmCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "rm NAME...",
		Short: "Remove templates no sandbox uses",
		Long:  "Remove each template, printing its name once removed. A template that\nsandboxes use is not removed: delete them first.",
		Args:  minArgs(1, "the names of the templates to remove"),
		RunE: func(cmd *cobra.Command, names []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			return a.forEach(cmd, names, c.DeleteTemplate)
		},
	}
}

func (a *app) newTemplateBuildCmd() *cobra.Command {
	var (
		packages, npm      []string
		suite, mirror      string
		hutchfile, context string
		fresh              bool
	)
	cmd := &cobra.Command{
		Use:   "build NAME --packages p1,p2,… | -f Hutchfile",
		Short: "Build a template from Debian, or from a Hutchfile",
		Long: "Build a template from Debian: the minimal base system and the packages\n" +
			"asked for, from the daemon host's release and apt mirror unless --suite and\n" +
			"--mirror say otherwise. Building a name that exists makes a new version of\n" +
			"it; sandboxes already made from it keep theirs. --npm packages are then\n" +
			"installed with the template's own npm, in a sandbox that reaches only the\n" +
			"npm registry. Interrupting the build (Ctrl-C) stops it and keeps nothing\n" +
			"of it. A build unpacks the base system an earlier one kept, and a default\n" +
			"template what an earlier build of it kept when nothing it is made from has\n" +
			"changed; --fresh builds from nothing.\n\n" +
			"Without packages, the names base, python, browser and agent build Hutch's\n" +
			"default templates: base has bash, coreutils, Python 3 with pip and venv,\n" +
			"Node.js with npm, Deno, Bun, git, ripgrep, curl, jq, sqlite3, unzip and\n" +
			"build-essential; python adds numpy, pandas, matplotlib, Flask and ipykernel;\n" +
			"browser adds Chromium and agent-browser; agent adds Claude Code to browser.\n\n" +
			"-f builds from a Hutchfile instead: FROM <template>, then RUN, COPY, ENV,\n" +
			"WORKDIR and USER lines as in a Dockerfile, each RUN in a sandbox of the\n" +
			"template so far. COPY takes files from --context (default: the\n" +
			"Hutchfile's directory).",
		Args: exactArgs(1, "the template's name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := client.BuildTemplateRequest{Name: args[0], Packages: packages, NpmPackages: npm, Suite: suite, Mirror: mirror, Fresh: fresh}
			if hutchfile != "" {
				text, err := os.ReadFile(hutchfile) // #nosec G304 -- the file the user named
				if err != nil {
					return err
				}
				if context == "" {
					context = filepath.Dir(hutchfile)
				}
				if req.Context, err = tarDir(context, rootfs.MaxContext); err != nil {
					return fmt.Errorf("the build context: %w (keep large files out of it, or name a smaller one with --context)", err)
				}
				req.Hutchfile = string(text)
			}
			return a.buildTemplate(cmd, req)
		},
	}
	cmd.Flags().StringSliceVarP(&packages, "packages", "p", nil, "Debian packages to install, comma-separated")
	cmd.Flags().StringSliceVar(&npm, "npm", nil, "npm packages to install globally afterwards (needs npm in --packages), comma-separated")
	cmd.Flags().StringVar(&suite, "suite", "", "Debian release (default: the daemon host's)")
	cmd.Flags().StringVar(&mirror, "mirror", "", "Debian mirror URL (default: the daemon host's apt mirror)")
	cmd.Flags().StringVarP(&hutchfile, "file", "f", "", "build from this Hutchfile")
	cmd.Flags().StringVar(&context, "context", "", "the directory a Hutchfile's COPY takes files from (default: the Hutchfile's)")
	cmd.Flags().BoolVar(&fresh, "fresh", false, "build from nothing, using no base system or default template an earlier build kept")
	return cmd
}

// progressPrinter shows a build's progress: on a terminal one line redrawn
// in place with a bar; otherwise a plain line each time the step or its
// message changes.
type progressPrinter struct {
	w        io.Writer
	terminal bool
	last     client.BuildProgress
	drawn    bool
}

func newProgressPrinter(w io.Writer) *progressPrinter {
	p := &progressPrinter{w: w}
	if f, ok := w.(*os.File); ok {
		_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
		p.terminal = err == nil
	}
	return p
}

func (p *progressPrinter) update(pr client.BuildProgress) {
	if !p.terminal {
		if pr.Step != p.last.Step || pr.Message != p.last.Message {
			_, _ = fmt.Fprintln(p.w, progressLine(pr)) // progress is best effort
		}
		p.last = pr
		return
	}
	p.last = pr
	p.drawn = true
	line := progressLine(pr)
	if len(line) > 100 {
		line = line[:100]
	}
	// \r back to the start, \033[K clears what the last line left.
	_, _ = fmt.Fprintf(p.w, "\r%s\033[K", line)
}

// end finishes the redrawn line.
func (p *progressPrinter) end() {
	if p.terminal && p.drawn {
		_, _ = fmt.Fprintln(p.w)
	}
}

// progressLine renders one step: "download  [#####-----]  52%  Retrieving libc6".
func progressLine(pr client.BuildProgress) string {
	bar := strings.Repeat(" ", 17)
	if pr.Total > 0 {
		const width = 10
		done := min(width, pr.Done*width/pr.Total)
		bar = fmt.Sprintf("[%s%s] %3d%%", strings.Repeat("#", done), strings.Repeat("-", width-done), min(100, pr.Done*100/pr.Total))
	}
	return fmt.Sprintf("%-9s %s  %s", pr.Step, bar, pr.Message)
}

// humanBytes renders a size: "512B", "1.5K", "210M", "1.2G".
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f%c", float64(n)/float64(div), "KMGTPE"[exp])
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (a *app) newTemplatePullCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "pull NAME IMAGE",
		Short: "Make a template from an OCI image in a registry",
		Long: "Make a template from an OCI image (linux/amd64) that the daemon pulls from\n" +
			"its registry: its layers, flattened, become the template's root, which\n" +
			"gets the sandbox user and its workspace. Commands run as that user unless\n" +
			"they ask for root.",
		Example: "  hutch template pull py docker.io/library/python:3.12-slim\n  hutch run --template py -- python3 -c 'print(1)'",
		Args:    exactArgs(2, "the template's name and the image reference"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.buildTemplate(cmd, client.BuildTemplateRequest{Name: args[0], Image: args[1]})
		},
	}
}

func (a *app) newTemplateImportCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "import NAME FILE",
		Short: "Make a template from an image archive",
		Long: "Make a template from an image archive: what `docker save` writes (a\n" +
			"docker-archive), or an OCI image layout packed in a tar. FILE - reads it\n" +
			"from stdin.",
		Example: "  docker save app:latest -o app.tar && hutch template import app app.tar",
		Args:    exactArgs(2, "the template's name and the archive file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var in io.Reader = a.stdin
			if args[1] != "-" {
				f, err := os.Open(args[1])
				if err != nil {
					return err
				}
				defer f.Close()
				in = f
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			t, err := c.ImportTemplate(cmd.Context(), args[0], in)
			if err != nil {
				return err
			}
			return a.printTemplate(t)
		},
	}
}

// buildTemplate builds (or pulls) a template, showing its progress.
func (a *app) buildTemplate(cmd *cobra.Command, req client.BuildTemplateRequest) error {
	c, err := a.connect()
	if err != nil {
		return err
	}
	show := newProgressPrinter(a.stderr)
	t, err := c.BuildTemplate(cmd.Context(), req, show.update)
	show.end()
	if err != nil {
		return err
	}
	return a.printTemplate(t)
}

// printTemplate prints a template just made: "name version (size)".
func (a *app) printTemplate(t *client.Template) error {
	if a.jsonOutput() {
		return a.printJSON(t)
	}
	_, err := fmt.Fprintf(a.stdout, "%s %s (%s)\n", t.Name, t.Version, humanBytes(t.SizeBytes))
	return err
}

// madeFrom says what a template was made from: its image, or its packages.
func madeFrom(t client.Template) string {
	if t.Image != "" {
		return t.Image
	}
	return strings.Join(append(append([]string{}, t.Packages...), t.NpmPackages...), ",")
}

// tarDir packs the directory dir into a tar, for a Hutchfile's COPY or a
// create's files: files, directories and symbolic links (as links), at
// most limit bytes.
func tarDir(dir string, limit int) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		} else if !fi.Mode().IsRegular() && !fi.IsDir() {
			return nil // sockets, devices: nothing to copy
		}
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			// #nosec G304 -- a file of the build context the user named
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			if _, err := io.Copy(tw, f); err != nil {
				return err
			}
		}
		if buf.Len() > limit {
			return fmt.Errorf("%s is over %d MiB", dir, limit>>20)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
