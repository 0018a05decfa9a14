package toolrun

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/hutchdev/hutch/internal/agent/tools"
	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core/coretest"
)

// nobody is who tool calls on the host run as in these tests, when they
// run as root: the owner of the host directory (ResolveHostUser).
const nobody = 65534

// hostDir is a host tools directory for a test. As root, it is nobody's,
// and its parent lets nobody through, so that calls run as nobody.
func hostDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if os.Geteuid() == 0 {
		if err := os.Chown(dir, nobody, nobody); err != nil {
			t.Fatal(err)
		}
		// #nosec G302 -- a test's temporary directory, traversable by nobody
		if err := os.Chmod(filepath.Dir(dir), 0o711); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const secretText = "TOPSECRET-of-the-host"

// Finding 6 of issue 36: a tool call on the host reached any host file as
// root (sandbox_read_file /var/lib/hutch/api.key). Now every spelling of
// a path out of the host directory, and every link planted in it, is
// refused on the host, in mode off and in selective (which may send the
// call to the sandbox instead: there, the sandbox's files are read; the
// fake backend has no chroot, so what it reads is not checked). The
// secret outside stays unread, unchanged, and its directory unwritten.
func TestAttackHostToolsEscape(t *testing.T) {
	c := coretest.Start(t)
	sb := newSandbox(t, c)

	type world struct{ dir, secretDir, secret string }
	setup := func(t *testing.T) world {
		w := world{dir: hostDir(t), secretDir: t.TempDir()}
		w.secret = filepath.Join(w.secretDir, "secret")
		if err := os.WriteFile(w.secret, []byte(secretText+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		rel, err := filepath.Rel(w.dir, w.secret)
		if err != nil {
			t.Fatal(err)
		}
		for link, target := range map[string]string{"link-file": w.secret, "rel-link": rel, "link-dir": w.secretDir, "sub/up": "../../" + filepath.Base(w.secretDir)} {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(w.dir, link)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, filepath.Join(w.dir, link)); err != nil {
				t.Fatal(err)
			}
		}
		if os.Geteuid() == 0 {
			// A hard link is only a threat to a daemon that can read more
			// than the host user can: root.
			if err := os.Link(w.secret, filepath.Join(w.dir, "hard")); err != nil {
				t.Fatal(err)
			}
		}
		return w
	}

	patch := func(body string) map[string]string {
		return map[string]string{"patch": "*** Begin Patch\n" + body + "*** End Patch\n"}
	}
	tests := []struct {
		name     string
		tool     string
		args     func(w world) any
		rootOnly bool
	}{
		{"read, absolute", tools.ReadFile, func(w world) any { return map[string]string{"path": w.secret} }, false},
		{"read, absolute through the dir and ..", tools.ReadFile, func(w world) any {
			return map[string]string{"path": w.dir + "/../../" + filepath.Base(filepath.Dir(w.secretDir)) + "/" + filepath.Base(w.secretDir) + "/secret"}
		}, false},
		{"read, ../ climbing", tools.ReadFile, func(w world) any { p, _ := filepath.Rel(w.dir, w.secret); return map[string]string{"path": p} }, false},
		{"read, ../../etc/passwd", tools.ReadFile, func(w world) any { return map[string]string{"path": strings.Repeat("../", 20) + "etc/passwd"} }, false},
		{"read, /etc/passwd", tools.ReadFile, func(w world) any { return map[string]string{"path": "/etc/passwd"} }, false},
		{"read, a symlink to a host file", tools.ReadFile, func(w world) any { return map[string]string{"path": "link-file"} }, false},
		{"read, a relative symlink climbing out", tools.ReadFile, func(w world) any { return map[string]string{"path": "rel-link"} }, false},
		{"read, through a symlink to a host dir", tools.ReadFile, func(w world) any { return map[string]string{"path": "link-dir/secret"} }, false},
		{"read, through a relative dir symlink", tools.ReadFile, func(w world) any { return map[string]string{"path": "sub/up/secret"} }, false},
		{"read, a hard link to a host file", tools.ReadFile, func(w world) any { return map[string]string{"path": "hard"} }, true},
		{"grep, the dir with a hard link in it", tools.GrepFiles, func(w world) any { return map[string]string{"pattern": "TOPSECRET"} }, true},
		{"list, absolute", tools.ListDirectory, func(w world) any { return map[string]string{"path": w.secretDir} }, false},
		{"list, a symlink to a host dir", tools.ListDirectory, func(w world) any { return map[string]string{"path": "link-dir"} }, false},
		{"grep, absolute", tools.GrepFiles, func(w world) any { return map[string]string{"pattern": "TOPSECRET", "path": w.secretDir} }, false},
		{"grep, a host file", tools.GrepFiles, func(w world) any { return map[string]string{"pattern": "TOPSECRET", "path": w.secret} }, false},
		{"grep, a symlink to a host dir", tools.GrepFiles, func(w world) any { return map[string]string{"pattern": "TOPSECRET", "path": "link-dir"} }, false},
		{"find, absolute", tools.FindFiles, func(w world) any { return map[string]string{"query": "secret", "path": w.secretDir} }, false},
		{"find, a symlink to a host dir", tools.FindFiles, func(w world) any { return map[string]string{"query": "secret", "path": "link-dir"} }, false},
		{"write, through a symlink to a host file", tools.WriteFile, func(w world) any { return map[string]string{"path": "link-file", "content": "pwned"} }, false},
		{"write, into a symlinked host dir", tools.WriteFile, func(w world) any { return map[string]string{"path": "link-dir/new", "content": "pwned"} }, false},
		{"write, absolute", tools.WriteFile, func(w world) any { return map[string]string{"path": w.secretDir + "/new", "content": "pwned"} }, false},
		{"find and replace, through a symlink", tools.FindReplace, func(w world) any {
			return map[string]string{"path": "link-file", "find": "TOPSECRET", "replace": "pwned"}
		}, false},
		{"patch, an update through a symlink", tools.ApplyPatch, func(w world) any {
			return patch("*** Update File: link-file\n@@\n-" + secretText + "\n+pwned\n")
		}, false},
		{"patch, an add in a symlinked host dir", tools.ApplyPatch, func(w world) any { return patch("*** Add File: link-dir/new\n+pwned\n") }, false},
		{"patch, a move out", tools.ApplyPatch, func(w world) any {
			return patch("*** Add File: mine.txt\n+x\n*** Update File: rel-link\n*** Move to: link-dir/moved\n@@\n-" + secretText + "\n+pwned\n")
		}, false},
		{"delete, through a symlinked host dir", tools.DeleteFile, func(w world) any { return map[string]string{"path": "link-dir/secret"} }, false},
		{"delete, absolute", tools.DeleteFile, func(w world) any { return map[string]any{"path": w.secretDir, "recursive": true} }, false},
		{"a command, its cwd out of the dir", tools.RunCommand, func(w world) any { return map[string]string{"command": "cat secret; touch new", "cwd": w.secretDir} }, false},
		{"a command, its cwd a symlink out", tools.RunCommand, func(w world) any { return map[string]string{"command": "cat secret; touch new", "cwd": "link-dir"} }, false},
	}
	for _, mode := range []string{tools.ModeOff, tools.ModeSelective} {
		for _, tc := range tests {
			t.Run(mode+"/"+tc.name, func(t *testing.T) {
				if tc.rootOnly && os.Geteuid() != 0 {
					t.Skip("a hard link to a file of the daemon's own user reads nothing it could not: the threat is a root daemon's")
				}
				w := setup(t)
				s := New(Config{Sandboxes: c.M, HostDir: w.dir})
				outcome, err := s.RunTool(t.Context(), sb.ID, Call{Name: tc.tool, Args: args(t, tc.args(w)), Mode: mode}, nil)
				if err != nil {
					t.Fatalf("the call: %v", err)
				}
				if outcome.Where != whereHost {
					return // the sandbox's to answer (the fake's files are the host's: not checked)
				}
				all := string(outcome.Result)
				if outcome.Error != nil {
					all += outcome.Error.Message
				}
				if strings.Contains(all, "TOPSECRET") {
					t.Errorf("the host's secret came back: %s", all)
				}
				if outcome.Error == nil && tc.tool != tools.GrepFiles { // grep finds nothing, which is no error
					t.Errorf("on the host, it worked: %s", outcome.Result)
				}
				if b, err := os.ReadFile(w.secret); err != nil || string(b) != secretText+"\n" {
					t.Errorf("the secret after the call: %q, %v", b, err)
				}
				entries, _ := os.ReadDir(w.secretDir)
				var names []string
				for _, e := range entries {
					names = append(names, e.Name())
				}
				if !slices.Equal(names, []string{"secret"}) {
					t.Errorf("the host dir after the call: %v", names)
				}
			})
		}
	}
}

// Finding 6 of issue 36, commands: sandbox_run_command on the host ran as
// root. Now it runs as the host directory's owner, with no supplementary
// group and no_new_privs, and what the file tools make there is that
// user's; a directory that only root could run calls as is refused.
func TestAttackHostCommandNotRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: a daemon that is not root runs host commands as itself, which is not root")
	}
	c := coretest.Start(t)
	sb := newSandbox(t, c)
	dir := hostDir(t)
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte(secretText+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// #nosec G302 -- the secret's directory lets nobody through: only the file's mode keeps it
	if err := os.Chmod(filepath.Dir(secret), 0o755); err != nil {
		t.Fatal(err)
	}
	s := New(Config{Sandboxes: c.M, HostDir: dir, Mode: tools.ModeOff})

	res := run(t, s, sb.ID, Call{Name: tools.RunCommand, Args: args(t, map[string]string{
		"command": "id -u; id -g; id -G; grep NoNewPrivs /proc/self/status; pwd; touch made-by-command; cat " + secret + " || echo unread",
	})})
	var ran runCommandResult
	if err := json.Unmarshal(res.Result, &ran); err != nil || res.Where != whereHost {
		t.Fatalf("the command: %+v, %v", res, err)
	}
	want := "65534\n65534\n65534\nNoNewPrivs:\t1\n" + dir + "\nunread\n"
	if ran.Stdout != want || strings.Contains(ran.Stdout+ran.Stderr, "TOPSECRET") {
		t.Errorf("the command's output %q (stderr %q), want %q", ran.Stdout, ran.Stderr, want)
	}
	res = run(t, s, sb.ID, Call{Name: tools.RunCommand, Args: args(t, map[string]string{"command": "sudo -n id -u || su -c id root </dev/null"})})
	if json.Unmarshal(res.Result, &ran) != nil || strings.Contains(ran.Stdout, "0\n") {
		t.Errorf("sudo or su gave root back: %+v", ran)
	}
	res = run(t, s, sb.ID, Call{Name: tools.WriteFile, Args: args(t, map[string]string{"path": "sub/made-by-tool", "content": "x"})})
	if res.Error != nil {
		t.Fatalf("a write: %+v", res.Error)
	}
	for _, name := range []string{"made-by-command", "sub", "sub/made-by-tool"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.Sys().(*syscall.Stat_t).Uid != nobody {
			t.Errorf("%s is not nobody's: %v, %v", name, fi, err)
		}
	}

	// A directory of root's has no unprivileged owner to run calls as.
	rootsDir := t.TempDir()
	s = New(Config{Sandboxes: c.M, HostDir: rootsDir, Mode: tools.ModeOff})
	_, err := s.RunTool(t.Context(), sb.ID, Call{Name: tools.RunCommand, Args: args(t, map[string]string{"command": "id -u"})}, nil)
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "never run as root") {
		t.Errorf("a root-owned host dir: %v, want failed_precondition saying it never runs as root", err)
	}
}
