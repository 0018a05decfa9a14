package e2e

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// The CLI as a user runs it, against a real daemon.
func TestCLI(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)

	id, stderr, code := d.cli("", "create", "--memory", "256")
	id = strings.TrimSpace(id)
	if code != 0 || id == "" {
		t.Fatalf("create: %d %q", code, stderr)
	}
	d.sandboxIDs = append(d.sandboxIDs, id)

	out, _, code := d.cli("", "exec", id, "--", "sh", "-c", "echo out; echo err >&2; exit 7")
	if code != 7 || out != "out\n" {
		t.Fatalf("exec: code %d out %q, want 7 and out", code, out)
	}
	out, _, code = d.cli("piped", "exec", "-i", "-e", "X=1", "-w", "/tmp", id, "--", "sh", "-c", "cat; echo $X; pwd")
	if code != 0 || out != "piped1\n/tmp\n" {
		t.Fatalf("exec with stdin/env/cwd: %d %q", code, out)
	}
	if _, stderr, code := d.cli("", "exec", "--timeout", "1s", id, "--", "sleep", "30"); code != 124 || !strings.Contains(stderr, "timed out") {
		t.Fatalf("exec timeout: %d %q, want 124 and a message", code, stderr)
	}

	out, _, code = d.cli("", "ls", "-o", "json")
	var list []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) != 1 || list[0]["id"] != id {
		t.Fatalf("ls -o json: %d %q", code, out)
	}
	if out, _, code := d.cli("", "ls"); code != 0 || !strings.Contains(out, id) {
		t.Fatalf("ls: %d %q", code, out)
	}
	if out, _, code := d.cli("", "inspect", id); code != 0 || !strings.Contains(out, "256") {
		t.Fatalf("inspect: %d %q", code, out)
	}
	if out, _, code := d.cli("", "stats", id); code != 0 || !strings.Contains(out, "of 256.0 MiB") {
		t.Fatalf("stats: %d %q", code, out)
	}

	d.cli("", "fs", "mkdir", id, "notes")
	if _, stderr, code := d.cli("written by cli\n", "cp", "-", id+":notes/a.txt"); code != 0 {
		t.Fatalf("cp from stdin: %d %s", code, stderr)
	}
	if out, _, _ := d.cli("", "fs", "cat", id, "notes/a.txt"); out != "written by cli\n" {
		t.Fatalf("fs cat: %q", out)
	}
	if out, _, _ := d.cli("", "fs", "ls", id, "notes"); !strings.Contains(out, "a.txt") {
		t.Fatalf("fs ls: %q", out)
	}
	if _, _, code := d.cli("", "fs", "rm", id, "notes"); code != 0 {
		t.Fatalf("fs rm: %d", code)
	}

	if _, stderr, code := d.cli("", "rm", id, "nosuchbox"); code == 0 || !strings.Contains(stderr, "nosuchbox") {
		t.Fatalf("rm of one good and one unknown id: %d %q", code, stderr)
	}
	if _, _, code := d.cli("", "inspect", id); code == 0 {
		t.Fatal("sandbox still there after rm")
	}

	// run: create, exec, destroy in one go, with the command's exit code,
	// under either runtime.
	out, _, code = d.cli("", "run", "--", "sh", "-c", "echo ran; exit 3")
	if code != 3 || out != "ran\n" {
		t.Fatalf("run: %d %q", code, out)
	}
	if runscBin != "" {
		// gVisor's kernel reports a release of its own, not the host's.
		host, err := os.ReadFile("/proc/sys/kernel/osrelease")
		if err != nil {
			t.Fatal(err)
		}
		if out, stderr, code := d.cli("", "run", "--runtime", "gvisor", "--", "uname", "-r"); code != 0 || out == "" || out == string(host) {
			t.Fatalf("run --runtime gvisor: %d %q %q, want a release other than the host's %q", code, out, stderr, host)
		}
	}
	if out, _, _ := d.cli("", "ls", "-o", "json"); strings.Contains(out, `"id"`) {
		t.Fatalf("run left a sandbox: %s", out)
	}
}
