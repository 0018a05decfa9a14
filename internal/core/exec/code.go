package exec

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core/create"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
)

// CodeRequest is code to run in a sandbox, in a language.
type CodeRequest struct {
	Language string
	Code     string
	Cwd      string // default: the workspace
	Env      map[string]string
	Timeout  time.Duration
	// ForUser is the product's user it runs for (see
	// Request).
	ForUser string
}

// language says how code in one language runs: the program, the arguments
// before the file, and the file's extension.
type language struct {
	program string
	args    []string
	ext     string
}

// denoRun runs a file with Deno's least permissions: it reads and writes
// the workspace and /tmp, and nothing else: no network (sandboxes have
// none), no subprocesses, no FFI, no environment (unless the request gives
// one), and no prompt for more.
var denoRun = []string{"run", "--no-prompt", "--allow-read=" + rootfs.Workspace + ",/tmp", "--allow-write=" + rootfs.Workspace + ",/tmp"}

// languages are what RunCode runs, by name.
var languages = map[string]language{
	"python":     {program: "python3", ext: ".py"},
	"node":       {program: "node", ext: ".js"},
	"typescript": {program: "deno", args: denoRun, ext: ".ts"},
	"deno":       {program: "deno", args: denoRun, ext: ".ts"},
	"bun":        {program: "bun", args: []string{"run"}, ext: ".ts"},
	"bash":       {program: "bash", ext: ".sh"},
	"sh":         {program: "sh", ext: ".sh"},
	"go":         {program: "go", args: []string{"run"}, ext: ".go"},
	"ruby":       {program: "ruby", ext: ".rb"},
}

// languageAliases are other names people use.
var languageAliases = map[string]string{
	"python3": "python", "py": "python", "javascript": "node", "js": "node", "ts": "typescript",
}

// codeScript writes the code (its stdin) to a file of its own in /tmp and
// runs the language's program on it. A missing program is told apart from
// the code's own failures by the marker it is given, written alone to
// stderr before anything else.
//
//	$1: the marker; $2: the file's extension; $3…: the program and its arguments
const codeScript = `marker=$1 ext=$2; shift 2
command -v "$1" >/dev/null 2>&1 || { echo "$marker" >&2; exit 127; }
dir=$(mktemp -d /tmp/hutch-code-XXXXXX) || exit 1
cat > "$dir/main$ext"
"$@" "$dir/main$ext" </dev/null
status=$?
rm -rf "$dir"
exit $status`

// RunCode runs code in a language in sandbox id, as Exec runs a command:
// output to out as it comes, the same result. A language whose program the
// sandbox's template lacks is a FailedPrecondition naming the templates
// that have it.
func (s *Service) RunCode(ctx context.Context, id string, req CodeRequest, out Output) (Result, error) {
	name := strings.ToLower(req.Language)
	if alias, ok := languageAliases[name]; ok {
		name = alias
	}
	lang, ok := languages[name]
	if !ok {
		return Result{}, errdefs.InvalidArgument("language must be one of %s, got %q",
			strings.Join(slices.Sorted(maps.Keys(languages)), ", "), req.Language)
	}
	args := slices.Clone(lang.args)
	if lang.program == "deno" && len(req.Env) > 0 {
		args = append(args, "--allow-env="+strings.Join(slices.Sorted(maps.Keys(req.Env)), ","))
	}
	// A marker the code cannot know: its own output never passes for it.
	marker := "hutch: missing runtime " + create.NewID()
	code := req.Code
	cmd := append([]string{"/bin/sh", "-c", codeScript, "hutch-code", marker, lang.ext, lang.program}, args...)
	exec := Request{Cmd: cmd, Cwd: req.Cwd, Env: req.Env, Stdin: &code, Timeout: req.Timeout, ForUser: req.ForUser}

	first, missing := true, false
	res, err := s.Exec(ctx, id, exec, func(st Stream, data []byte) error {
		if first && st == Stderr && string(data) == marker+"\n" {
			missing = true
			return nil
		}
		first = false
		return out(st, data)
	})
	if err != nil {
		return res, err
	}
	if missing && res.ExitCode == 127 {
		return Result{}, s.missingRuntime(ctx, id, name, lang.program)
	}
	return res, nil
}

// missingRuntime says which templates have what a sandbox lacks.
func (s *Service) missingRuntime(ctx context.Context, id, lang, program string) error {
	tmpl := "?"
	if rec, err := s.store.GetSandbox(ctx, id); err == nil {
		tmpl = rec.Template
	}
	with := rootfs.RecipesWith(program)
	if len(with) == 0 {
		return errdefs.FailedPrecondition("%s code needs %s, which template %s of sandbox %s does not have, nor does any default template: build one with it (hutch template build NAME -p <its Debian package>)",
			lang, program, tmpl, id)
	}
	which := "template " + with[0] + " has it"
	if len(with) > 1 {
		which = "templates " + strings.Join(with[:len(with)-1], ", ") + " and " + with[len(with)-1] + " have it"
	}
	return errdefs.FailedPrecondition("%s code needs %s, which template %s of sandbox %s does not have; %s: create the sandbox with \"template\": %q",
		lang, program, tmpl, id, which, with[0])
}
