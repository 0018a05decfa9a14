package e2e

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
)

// The documentation's commands are run by a test (issue 37): a ```sh block
// of README.md or docs/*.md is what a reader types against a local daemon,
// and each runs here, against a daemon of the test's own, as the reader
// would run it. Output shown to the reader, commands for another host and
// configuration are ```console, ```text and the like, and are not run.

// docsRoot is the repository, from this package's directory.
const docsRoot = "../.."

// blockTimeout is how long one block may run.
const blockTimeout = 2 * time.Minute

// docBlock is one ```sh block: where it starts, for messages, and its text.
type docBlock struct {
	file string // relative to the repository: README.md, docs/sandboxes.md
	line int    // of the opening fence
	text string
}

// docFiles are the pages a reader reads: README.md, then docs/*.md in name
// order (deploy/README.md is for the cluster's operators, and not here).
func docFiles(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(docsRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"README.md"}
	for _, p := range pages {
		files = append(files, filepath.Join("docs", filepath.Base(p)))
	}
	return files
}

// shBlocks returns the ```sh blocks of file, in order.
func shBlocks(t *testing.T, file string) []docBlock {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(docsRoot, file))
	if err != nil {
		t.Fatal(err)
	}
	var blocks []docBlock
	var cur *docBlock
	for i, line := range strings.Split(string(b), "\n") {
		fence := strings.TrimSpace(line)
		switch {
		case cur != nil && fence == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.text += line + "\n"
		case fence == "```sh":
			cur = &docBlock{file: file, line: i + 1}
		}
	}
	if cur != nil {
		t.Fatalf("%s:%d: the ```sh block is not closed", file, cur.line)
	}
	return blocks
}

// TestDocsCommands runs every ```sh block of the documentation, each in a
// directory of its own with the test's hutch first in PATH and HUTCH_URL
// and HUTCH_API_KEY naming the test's daemon (the administrator's key). A
// block fails when a command in it does (bash -e, pipefail), and must
// leave no sandbox behind.
func TestDocsCommands(t *testing.T) {
	t.Parallel()
	var blocks []docBlock
	for _, f := range docFiles(t) {
		blocks = append(blocks, shBlocks(t, f)...)
	}
	if len(blocks) == 0 {
		t.Fatal("no ```sh block in README.md or docs/*.md")
	}
	// gVisor where it is here, as on a reader's host: a sandbox that
	// names no runtime is gVisor's there (the harness's default is runc).
	var flags []string
	if runscBin != "" {
		flags = []string{"--runtime", "gvisor"}
	}
	d := startDaemonWith(t, flags...)
	// Registered after startDaemon's, so run before its leak census: the
	// sandboxes the blocks made through the CLI and curl are checked too.
	t.Cleanup(func() { d.sandboxIDs = append(d.sandboxIDs, createdSandboxes(t, d)...) })

	env := []string{
		"PATH=" + filepath.Dir(hutchBin) + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HUTCH_URL=http://" + d.addr,
		"HUTCH_API_KEY=" + d.key,
	}
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name != "PATH" && name != "HOME" && !strings.HasPrefix(name, "HUTCH_") && !strings.HasPrefix(name, "E2B_") {
			env = append(env, kv)
		}
	}
	for _, b := range blocks {
		// The page's base name: the names of the pages differ, and a
		// slash would make a level of -run's pattern.
		t.Run(filepath.Base(b.file)+":"+strconv.Itoa(b.line), func(t *testing.T) {
			dir := t.TempDir()
			out, err := runBlock(t, b.text, dir, append(slices.Clip(env), "HOME="+dir))
			if err != nil {
				t.Errorf("%s:%d: %v\n--- the block:\n%s--- its output:\n%s", b.file, b.line, err, b.text, out)
			} else {
				t.Logf("output:\n%s", out)
			}
			leftSandboxes(t, d, b)
		})
	}
}

// runBlock runs text with bash -euo pipefail in dir, and returns its
// output, stdout and stderr as they came.
func runBlock(t *testing.T, text, dir string, env []string) (string, error) {
	ctx, cancel := context.WithTimeout(t.Context(), blockTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", text)
	cmd.Dir, cmd.Env = dir, env
	// The whole group goes at the timeout: a block's background command
	// too, which would otherwise hold the output open.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		err = errors.New("timed out after " + blockTimeout.String())
	}
	return string(out), err
}

// leftSandboxes fails t for each sandbox the daemon still has after block
// b, and deletes it, so the next block starts with none.
func leftSandboxes(t *testing.T, d *daemon, b docBlock) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	list, err := d.client.ListSandboxes(ctx)
	if err != nil {
		t.Fatalf("list sandboxes: %v", err)
	}
	for _, sb := range list {
		t.Errorf("%s:%d left sandbox %s behind (end the block with hutch rm)", b.file, b.line, sb.ID)
		if err := d.client.DeleteSandbox(ctx, sb.ID); err != nil && !client.IsNotFound(err) {
			t.Errorf("delete sandbox %s: %v", sb.ID, err)
		}
	}
}

// createdSandboxes are the ids of every sandbox made through the daemon's
// API, from its audit log.
func createdSandboxes(t *testing.T, d *daemon) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var ids []string
	f := client.AuditFilter{Limit: 1000}
	for {
		entries, err := d.client.ListAudit(ctx, f)
		if err != nil {
			t.Errorf("list the audit log: %v", err)
			return ids
		}
		for _, e := range entries {
			if e.Action == "POST /v1/sandboxes" && e.Status < 300 {
				if id, _, _ := strings.Cut(e.Object, " "); id != "" {
					ids = append(ids, id)
				}
			}
			f.Before = e.ID
		}
		if len(entries) < f.Limit {
			return ids
		}
	}
}

// sessionWord is the word "session", which in these pages means a
// terminal's or an MCP client's: a sandbox is not a session.
var sessionWord = regexp.MustCompile(`(?i)\bsessions?\b`)

// sessionContext is what says, on a line or the line beside it, which
// session it is.
var sessionContext = regexp.MustCompile(`(?i)\b(terminal|pty|mcp|setsid)`)

// TestREADMEShort keeps README.md a page that is read: detail goes in
// docs/.
func TestREADMEShort(t *testing.T) {
	t.Parallel()
	if n := len(fileLines(t, filepath.Join(docsRoot, "README.md"))); n > 300 {
		t.Errorf("README.md has %d lines, more than 300: move detail into docs/", n)
	}
}

// TestDocsSessionWord checks that "session" names only a terminal's or an
// MCP client's session in README.md and docs/*.md: the word, or its plural,
// has "terminal", "pty", "MCP" or "setsid" on its line or a line beside it.
func TestDocsSessionWord(t *testing.T) {
	t.Parallel()
	var offenders []string
	for _, file := range docFiles(t) {
		lines := fileLines(t, filepath.Join(docsRoot, file))
		for i, line := range lines {
			if !sessionWord.MatchString(line) {
				continue
			}
			near := strings.Join(lines[max(i-1, 0):min(i+2, len(lines))], "\n")
			if !sessionContext.MatchString(near) {
				offenders = append(offenders, file+":"+strconv.Itoa(i+1)+": "+strings.TrimSpace(line))
			}
		}
	}
	if len(offenders) > 0 {
		t.Errorf("\"session\" where no terminal (pty, setsid) or MCP session is meant (a sandbox is a sandbox):\n%s",
			strings.Join(offenders, "\n"))
	}
}

func fileLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}
