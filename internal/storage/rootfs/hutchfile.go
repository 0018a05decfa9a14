package rootfs

// Hutchfiles: a Dockerfile-like recipe for a template layered on another.
//
//	FROM base
//	ENV PIP_NO_CACHE_DIR=1
//	WORKDIR /opt/app
//	COPY requirements.txt src/ /opt/app/
//	RUN apt-get update && apt-get install -y --no-install-recommends golang-go
//	USER user
//	RUN echo ready > ~/note
//
// The new root starts as the FROM template's, shared file by file (hard
// links: a step that changes a file replaces it, so the parent never
// changes). Each RUN and COPY runs in a sandbox of the root so far, and what
// it changed is applied to the root; COPY unpacks the sources with tar
// inside that sandbox, so the daemon never writes into the root by a path
// the root's own symbolic links could redirect.

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// SourceHutchfile marks a template built from a Hutchfile.
const SourceHutchfile = "hutchfile"

// MaxContext bounds a Hutchfile's build context (the files COPY takes).
const MaxContext = 64 << 20

// Instruction is one line of a Hutchfile.
type Instruction struct {
	Line int
	Op   string   // FROM, RUN, COPY, ENV, WORKDIR, USER
	Args []string // RUN: one shell command, or the exec form's argv
	Exec bool     // RUN in exec form: ["prog", "arg"]
	Text string   // the line as written, for progress and the template's record
}

// Hutchfile is a parsed recipe: FROM, then the rest in order.
type Hutchfile struct {
	From  string
	Steps []Instruction
}

// ParseHutchfile reads a Hutchfile. Lines ending in \ continue on the next;
// # starts a comment line. Every problem names its line.
func ParseHutchfile(text string) (Hutchfile, error) {
	var hf Hutchfile
	var logical []Instruction
	var cur strings.Builder
	start := 0
	for i, line := range strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n") {
		trimmed := strings.TrimSpace(line)
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if cur.Len() == 0 {
			start = i + 1
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur.WriteString(strings.TrimSpace(strings.TrimSuffix(trimmed, "\\")) + " ")
			continue
		}
		cur.WriteString(trimmed)
		logical = append(logical, Instruction{Line: start, Text: strings.TrimSpace(cur.String())})
		cur.Reset()
	}
	if cur.Len() > 0 {
		logical = append(logical, Instruction{Line: start, Text: strings.TrimSpace(cur.String())})
	}
	for n, in := range logical {
		op, rest, _ := strings.Cut(in.Text, " ")
		in.Op, rest = strings.ToUpper(op), strings.TrimSpace(rest)
		bad := func(format string, args ...any) error {
			return errdefs.InvalidArgument("Hutchfile line %d: %s", in.Line, fmt.Sprintf(format, args...))
		}
		if (in.Op == "FROM") != (n == 0) {
			return hf, bad("a Hutchfile starts with FROM <template>, and has one")
		}
		switch in.Op {
		case "FROM":
			if err := CheckName(rest); err != nil && rest != HostName {
				return hf, bad("FROM takes a template's name: %v", err)
			}
			hf.From = rest
			continue
		case "RUN":
			if rest == "" {
				return hf, bad("RUN needs a command")
			}
			if strings.HasPrefix(rest, "[") {
				if err := json.Unmarshal([]byte(rest), &in.Args); err != nil || len(in.Args) == 0 {
					return hf, bad(`RUN ["prog", "arg", …] must be a JSON array of strings`)
				}
				in.Exec = true
			} else {
				in.Args = []string{rest}
			}
		case "COPY":
			in.Args = strings.Fields(rest)
			if len(in.Args) < 2 {
				return hf, bad("COPY needs one or more sources and a destination")
			}
			for _, a := range in.Args[:len(in.Args)-1] {
				if strings.HasPrefix(a, "--") {
					return hf, bad("COPY takes no options (%s): files are root's, as in a Dockerfile; RUN chown to change that", a)
				}
			}
		case "ENV":
			pairs, err := parseEnv(rest)
			if err != nil {
				return hf, bad("%v", err)
			}
			in.Args = pairs
		case "WORKDIR", "USER":
			if rest == "" || strings.ContainsAny(rest, " \t") {
				return hf, bad("%s takes one word", in.Op)
			}
			in.Args = []string{rest}
		default:
			return hf, bad("unknown instruction %q (FROM, RUN, COPY, ENV, WORKDIR and USER are)", op)
		}
		hf.Steps = append(hf.Steps, in)
	}
	if hf.From == "" {
		return hf, errdefs.InvalidArgument("the Hutchfile is empty: it starts with FROM <template>")
	}
	return hf, nil
}

// parseEnv reads ENV's arguments: K=V pairs, or one K and its value.
func parseEnv(rest string) ([]string, error) {
	if k, v, ok := strings.Cut(rest, " "); ok && !strings.Contains(k, "=") {
		if !ValidEnvName(k) {
			return nil, fmt.Errorf("ENV: %q is not a variable name", k)
		}
		return []string{k + "=" + strings.TrimSpace(v)}, nil
	}
	var pairs []string
	for _, f := range strings.Fields(rest) {
		k, v, ok := strings.Cut(f, "=")
		if !ok || !ValidEnvName(k) {
			return nil, fmt.Errorf("ENV takes NAME=value pairs, or NAME value; got %q", f)
		}
		pairs = append(pairs, k+"="+strings.Trim(v, `"`))
	}
	if len(pairs) == 0 {
		return nil, errors.New("ENV needs a variable")
	}
	return pairs, nil
}

// ValidEnvName reports whether name can be an environment variable's name:
// a letter or _, then letters, digits and _.
func ValidEnvName(name string) bool {
	for i, c := range []byte(name) {
		letter := c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c == '_'
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return name != ""
}

// RecipeAllow is where a Hutchfile's RUN steps may reach: the package
// registries of Debian, npm, PyPI, Go and Rust (besides the FROM
// template's own Debian mirror).
var RecipeAllow = []string{
	NpmRegistry, "pypi.org:443", "files.pythonhosted.org:443",
	"proxy.golang.org:443", "sum.golang.org:443", "index.crates.io:443", "static.crates.io:443",
	"deb.debian.org:80", "deb.debian.org:443", "security.debian.org:80",
}

// BuildHutchfile builds name from hf, layered on its FROM template. The
// context, a tar of the directory the Hutchfile came with, holds what COPY
// takes. run runs the steps.
func (s *Store) BuildHutchfile(ctx context.Context, name string, hf Hutchfile, contextTar []byte, run Runner, progress func(Progress)) (_ Info, err error) {
	if progress == nil {
		progress = func(Progress) {}
	}
	if hf.From == HostName {
		return Info{}, errdefs.InvalidArgument("FROM host: the host template is the host's own /usr, not a root of its own to layer on; build from base or another built template")
	}
	parent, err := s.Get(hf.From)
	if err != nil {
		return Info{}, err
	}
	parentInfo, err := s.Info(hf.From)
	if err != nil {
		return Info{}, err
	}
	if run == nil {
		return Info{}, errdefs.FailedPrecondition("a Hutchfile's steps run in sandboxes, and this build has none to run them in")
	}
	allow := slices.Clone(RecipeAllow)
	if m, err := mirrorAddress(parentInfo.Mirror); err == nil && !slices.Contains(allow, m) {
		allow = append(allow, m)
	}
	b, err := s.Begin(name)
	if err != nil {
		return Info{}, err
	}
	defer func() { err = b.fail(ctx, err) }()
	progress(Progress{Step: "from", Message: "Starting from " + hf.From + " " + parentInfo.Version})
	if err := linkTree(parent.RootDir, b.Root()); err != nil {
		return Info{}, fmt.Errorf("template %s: share the root of %s: %w", name, hf.From, err)
	}
	// The parent's variables, with the trust of its store for a parent
	// built before templates had them; ENV lines go over both.
	env, err := withBundleTrust(b.Root(), parentInfo.Env)
	if err != nil {
		return Info{}, fmt.Errorf("template %s: %w", name, err)
	}
	user, workdir := "root", "/"
	var record []string
	for i, in := range hf.Steps {
		progress(Progress{Step: "step", Done: i, Total: len(hf.Steps), Message: in.Text})
		record = append(record, in.Text)
		switch in.Op {
		case "ENV":
			for _, kv := range in.Args {
				k, v, _ := strings.Cut(kv, "=")
				env[k] = v
			}
		case "USER":
			user = in.Args[0]
		case "WORKDIR":
			workdir = path.Join(workdir, in.Args[0])
		case "RUN":
			argv := in.Args
			if !in.Exec {
				argv = []string{"/bin/sh", "-c", in.Args[0]}
			}
			// The working directory is made first, as Docker does.
			argv = append([]string{"/bin/sh", "-c", `mkdir -p "$1" && cd "$1" && shift && exec "$@"`, "workdir", workdir}, argv...)
			err := run(ctx, b.Root(), RunStep{
				Argv: argv, Env: env, User: user, Cwd: "/", Allow: allow,
				Output: func(line string) { progress(Progress{Step: "run", Message: line}) },
			})
			if err != nil {
				return Info{}, stepError(in, err)
			}
		case "COPY":
			if err := copyStep(ctx, b.Root(), in, contextTar, workdir, run); err != nil {
				return Info{}, stepError(in, err)
			}
		}
	}
	progress(Progress{Step: "finish", Total: len(hf.Steps), Done: len(hf.Steps), Message: "Done"})
	return b.Commit(Info{
		Source: SourceHutchfile, Parent: hf.From + "@" + parentInfo.Version, Steps: record, Env: env,
		Suite: parentInfo.Suite, Mirror: parentInfo.Mirror,
	})
}

// stepError names the line of a step that failed; err keeps its kind.
func stepError(in Instruction, err error) error {
	return errdefs.Prefix(err, "Hutchfile line %d (%s)", in.Line, in.Text)
}

// copyStep copies COPY's sources out of the build context into the root:
// a tar of them, unpacked by tar inside a sandbox of the root. As in a
// Dockerfile: a directory's contents are copied, not the directory; one
// file copied to a destination not ending in / takes that name; else the
// destination is a directory, made if missing. Files are root's.
func copyStep(ctx context.Context, root string, in Instruction, contextTar []byte, workdir string, run Runner) error {
	srcs, dest := in.Args[:len(in.Args)-1], in.Args[len(in.Args)-1]
	toDir := len(srcs) > 1 || strings.HasSuffix(dest, "/")
	if !path.IsAbs(dest) {
		dest = path.Join(workdir, dest)
	}
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	dir := dest
	for _, src := range srcs {
		want := path.Clean("/" + src)[1:] // "" is the whole context
		found := false
		tr := tar.NewReader(bytes.NewReader(contextTar))
		for {
			hdr, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return errdefs.InvalidArgument("the build context: %v", err)
			}
			name := path.Clean("/" + hdr.Name)[1:]
			var rel string
			switch {
			case name == want && hdr.Typeflag == tar.TypeDir, name == "" && want == "":
				found = true
				continue // a directory: its contents, below
			case name == want && !toDir:
				rel, dir = path.Base(dest), path.Dir(dest) // one file, named by dest
			case name == want:
				rel = path.Base(name)
			case want == "":
				rel = name
			case strings.HasPrefix(name, want+"/"):
				rel = strings.TrimPrefix(name, want+"/")
			default:
				continue
			}
			found = true
			h := *hdr
			h.Name, h.Uid, h.Gid, h.Uname, h.Gname = rel, 0, 0, "", ""
			if err := tw.WriteHeader(&h); err != nil {
				return err
			}
			// #nosec G110 -- from a context of at most MaxContext bytes
			if _, err := io.Copy(tw, tr); err != nil {
				return err
			}
		}
		if !found {
			return errdefs.InvalidArgument("COPY %s: no such file in the build context", src)
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	data := out.String()
	return run(ctx, root, RunStep{
		Argv:  []string{"/bin/sh", "-c", `mkdir -p "$1" && exec tar -x --no-same-permissions -C "$1" -f -`, "copy", dir},
		Stdin: &data,
		User:  "root",
		Cwd:   "/",
	})
}

// linkTree makes dst a copy of the tree src that shares its files by hard
// links: directories, symbolic links and special files are made anew,
// with src's owners, modes and times.
func linkTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("%s: no owner", p)
		}
		switch {
		case fi.IsDir():
			if err := os.Mkdir(target, 0o700); err != nil {
				return err
			}
			if err := os.Lchown(target, int(st.Uid), int(st.Gid)); err != nil {
				return err
			}
			return os.Chmod(target, fi.Mode()&(os.ModePerm|os.ModeSticky|os.ModeSetgid|os.ModeSetuid))
		case fi.Mode()&os.ModeSymlink != 0:
			dest, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if err := os.Symlink(dest, target); err != nil {
				return err
			}
			return os.Lchown(target, int(st.Uid), int(st.Gid))
		case fi.Mode().IsRegular():
			return os.Link(p, target)
		}
		return nil // sockets, fifos, devices: not in templates
	})
}
