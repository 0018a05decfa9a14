package e2e

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
)

// A checkpoint keeps a sandbox's files as they were while it runs on; the
// diff since lists exactly what changed; a rollback after an rm -rf brings
// every file back byte for byte, the sandbox running again with its
// background process; bad requests are refused without touching it. Under
// both runtimes.
func TestCheckpoints(t *testing.T) {
	t.Parallel()
	requireBtrfs(t)
	d := startDaemon(t)
	forEachRuntime(t, func(t *testing.T, runtime string) {
		ctx := t.Context()
		sb := d.create(client.CreateSandboxRequest{Runtime: runtime})
		// A workspace of small files and a few large ones, and a
		// manifest of their checksums kept outside it.
		if res := d.exec(sb.ID, `set -e; mkdir -p work/src work/data
for i in $(seq 1 200); do echo "line $i of file $i" > work/src/f$i.txt; done
for i in 1 2 3; do head -c 8M /dev/urandom > work/data/blob$i; done
printf 'one\ntwo\nthree\n' > work/notes.txt
find work -type f | sort | xargs sha256sum > /tmp/manifest`); res.ExitCode != 0 {
			t.Fatalf("write the workspace: %+v", res)
		}
		if _, err := d.client.StartProcess(ctx, sb.ID, client.StartProcessRequest{Name: "ticker", Command: "while true; do date > /tmp/tick; sleep 1; done"}); err != nil {
			t.Fatal(err)
		}

		cp, err := d.client.CreateCheckpoint(ctx, sb.ID, client.CheckpointRequest{Name: "before the cleanup"})
		if err != nil {
			t.Fatal(err)
		}
		if cp.ID == "" || cp.Name != "before the cleanup" || cp.Memory {
			t.Errorf("checkpoint: %+v", cp)
		}
		list, err := d.client.ListCheckpoints(ctx, sb.ID)
		if err != nil || len(list) != 1 || list[0].ID != cp.ID || list[0].SizeBytes < 24<<20 {
			t.Errorf("checkpoints: %+v, %v; want %s holding the 24 MiB written", list, err, cp.ID)
		}
		if after, err := d.client.GetSandbox(ctx, sb.ID); err != nil || after.State != "running" {
			t.Errorf("after the checkpoint the sandbox is %+v, %v", after, err)
		}

		// The agent's mistakes: the workspace gone but for one changed
		// file, and a new one.
		if res := d.exec(sb.ID, `set -e; rm -rf work/src work/data; printf 'one\nTWO\nthree\n' > work/notes.txt; echo new > work/added.txt`); res.ExitCode != 0 {
			t.Fatalf("change the workspace: %+v", res)
		}
		diff, err := d.client.DiffCheckpoint(ctx, sb.ID, cp.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		home := strings.TrimSpace(d.exec(sb.ID, "pwd").Stdout) + "/work"
		var got []string
		for _, c := range diff.Changes {
			if strings.HasPrefix(c.Path, home) {
				got = append(got, c.Kind+" "+strings.TrimPrefix(c.Path, home))
			} else if !strings.HasPrefix(c.Path, "/tmp/") && c.Path != "/tmp" {
				t.Errorf("the diff lists %s %s, which nothing changed", c.Kind, c.Path)
			}
		}
		want := []string{"added /added.txt", "changed /notes.txt", "removed /data", "removed /src"}
		for i := 1; i <= 3; i++ {
			want = append(want, "removed /data/blob"+strconv.Itoa(i))
		}
		for i := 1; i <= 200; i++ {
			want = append(want, "removed /src/f"+strconv.Itoa(i)+".txt")
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("the diff lists %d changes under %s, want %d:\n%v", len(got), home, len(want), strings.Join(firstN(got, 12), "\n"))
		}
		one, err := d.client.DiffCheckpoint(ctx, sb.ID, cp.ID, home+"/notes.txt")
		if err != nil || !strings.Contains(one.Unified, "-two\n+TWO\n") {
			t.Errorf("the unified diff of notes.txt: %q, %v", one.Unified, err)
		}

		// Refused, the sandbox untouched: an unknown checkpoint, memory
		// under runc.
		before, _ := d.client.GetSandbox(ctx, sb.ID)
		_, err = d.client.RollbackCheckpoint(ctx, sb.ID, "c999", client.RollbackRequest{})
		var ce *client.Error
		if !errors.As(err, &ce) || ce.StatusCode != http.StatusNotFound {
			t.Errorf("a rollback to c999: %v, want 404", err)
		}
		if runtime == "runc" {
			_, err := d.client.CreateCheckpoint(ctx, sb.ID, client.CheckpointRequest{Memory: true})
			if !errors.As(err, &ce) || ce.Code != "failed_precondition" {
				t.Errorf("a checkpoint with memory under runc: %v, want failed_precondition", err)
			}
		}
		if now, _ := d.client.GetSandbox(ctx, sb.ID); now.State != "running" || now.StateReason != before.StateReason {
			t.Errorf("a refused rollback changed the sandbox: %+v, was %+v", now, before)
		}

		rolled, err := d.client.RollbackCheckpoint(ctx, sb.ID, cp.ID, client.RollbackRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if rolled.State != "running" {
			t.Errorf("after the rollback the sandbox is %s (%s)", rolled.State, rolled.StateReason)
		}
		if res := d.exec(sb.ID, "sha256sum --quiet -c /tmp/manifest && test ! -e work/added.txt"); res.ExitCode != 0 {
			t.Errorf("after the rollback the files differ: %+v", res)
		}
		if diff, err := d.client.DiffCheckpoint(ctx, sb.ID, cp.ID, ""); err != nil {
			t.Error(err)
		} else {
			for _, c := range diff.Changes {
				if !strings.HasPrefix(c.Path, "/tmp/") { // the ticker writes on
					t.Errorf("after the rollback the diff lists %+v", c)
				}
			}
		}
		// Its background process runs again.
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			if res := d.exec(sb.ID, "test $(( $(date +%s) - $(date -r /tmp/tick +%s) )) -le 3"); res.ExitCode == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the background process did not run again after the rollback")
			}
		}

		// A second checkpoint, then the first deleted: listed no more,
		// and ids are not given again.
		second, err := d.client.CreateCheckpoint(ctx, sb.ID, client.CheckpointRequest{})
		if err != nil || second.ID == cp.ID {
			t.Fatalf("second checkpoint: %+v, %v", second, err)
		}
		if err := d.client.DeleteCheckpoint(ctx, sb.ID, cp.ID); err != nil {
			t.Fatal(err)
		}
		if list, err := d.client.ListCheckpoints(ctx, sb.ID); err != nil || len(list) != 1 || list[0].ID != second.ID {
			t.Errorf("after the delete: %+v, %v", list, err)
		}
		if err := d.client.DeleteCheckpoint(ctx, sb.ID, cp.ID); !errors.As(err, &ce) || ce.StatusCode != http.StatusNotFound {
			t.Errorf("a second delete: %v, want 404", err)
		}

		// The CLI: take one, change a file, see it in the diff, list.
		out, stderr, code := d.cli("", "checkpoint", "create", sb.ID, "--name", "from the cli")
		third := strings.TrimSpace(out)
		if code != 0 || !strings.HasPrefix(third, "c") {
			t.Fatalf("hutch checkpoint create: %d %q %s", code, out, stderr)
		}
		d.exec(sb.ID, "echo changed >> work/notes.txt")
		if out, stderr, code := d.cli("", "checkpoint", "diff", sb.ID, third); code != 0 || !strings.Contains(out, "M "+home+"/notes.txt\n") {
			t.Errorf("hutch checkpoint diff: %d %q %s", code, out, stderr)
		}
		if out, stderr, code := d.cli("", "checkpoint", "diff", sb.ID, third, "--path", home+"/notes.txt"); code != 0 || !strings.Contains(out, "+changed") {
			t.Errorf("hutch checkpoint diff --path: %d %q %s", code, out, stderr)
		}
		if out, stderr, code := d.cli("", "checkpoint", "ls", sb.ID); code != 0 || !strings.Contains(out, "from the cli") || !strings.Contains(out, second.ID) {
			t.Errorf("hutch checkpoint ls: %d %q %s", code, out, stderr)
		}
		if _, stderr, code := d.cli("", "checkpoint", "rm", sb.ID, third); code != 0 {
			t.Errorf("hutch checkpoint rm: %d %s", code, stderr)
		}

		// A suspended sandbox lists its checkpoints without waking.
		if _, err := d.client.SuspendSandbox(ctx, sb.ID); err != nil {
			t.Fatal(err)
		}
		if list, err := d.client.ListCheckpoints(ctx, sb.ID); err != nil || len(list) != 1 {
			t.Errorf("checkpoints of the suspended sandbox: %+v, %v", list, err)
		}
		if now, _ := d.client.GetSandbox(ctx, sb.ID); now.State != "suspended" {
			t.Errorf("listing woke the sandbox: %s", now.State)
		}
		if err := d.client.DeleteSandbox(ctx, sb.ID); err != nil {
			t.Fatal(err)
		}
	})
}

// Under gVisor a checkpoint with memory keeps a process's state: after
// the state changed, a rollback with memory brings back the process as it
// was.
func TestCheckpointMemory(t *testing.T) {
	t.Parallel()
	requireBtrfs(t)
	requireGvisor(t)
	d := startDaemon(t)
	ctx := t.Context()
	sb := d.create(client.CreateSandboxRequest{Runtime: "gvisor"})
	// A process whose state is in its memory alone: a counter it prints
	// on each request.
	if res := d.exec(sb.ID, `cat > /tmp/counter.py <<'EOF'
import http.server
n = 0
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        global n
        n += 1
        self.send_response(200); self.end_headers(); self.wfile.write(str(n).encode())
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", 8000), H).serve_forever()
EOF`); res.ExitCode != 0 {
		t.Fatalf("write the counter: %+v", res)
	}
	if _, err := d.client.StartProcess(ctx, sb.ID, client.StartProcessRequest{Name: "counter", Command: "python3 /tmp/counter.py"}); err != nil {
		t.Fatal(err)
	}
	count := func() string {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			res := d.exec(sb.ID, "curl -sf --max-time 2 http://127.0.0.1:8000/")
			if res.ExitCode == 0 || time.Now().After(deadline) {
				return res.Stdout
			}
		}
	}
	for range 3 {
		count()
	}
	cp, err := d.client.CreateCheckpoint(ctx, sb.ID, client.CheckpointRequest{Memory: true})
	if err != nil {
		t.Fatal(err)
	}
	if !cp.Memory {
		t.Fatalf("checkpoint: %+v, want memory", cp)
	}
	if got := count(); got != "4" {
		t.Errorf("after the checkpoint the counter says %q, want 4", got)
	}
	for range 5 {
		count()
	}
	if _, err := d.client.RollbackCheckpoint(ctx, sb.ID, cp.ID, client.RollbackRequest{Memory: true}); err != nil {
		t.Fatal(err)
	}
	if got := count(); got != "4" {
		t.Errorf("after the rollback with memory the counter says %q, want 4 (as at the checkpoint)", got)
	}
	// Files only: the process starts afresh.
	if _, err := d.client.RollbackCheckpoint(ctx, sb.ID, cp.ID, client.RollbackRequest{}); err != nil {
		t.Fatal(err)
	}
	if got := count(); got != "1" {
		t.Errorf("after the rollback of files only the counter says %q, want 1 (started again)", got)
	}
}

// requireBtrfs skips a test of checkpoints where sandboxes' disks cannot
// be btrfs.
func requireBtrfs(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("mkfs.btrfs"); err != nil {
		t.Skip("checkpoints need btrfs disks: apt-get install btrfs-progs (./setup --deps does)")
	}
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], "…")
	}
	return s
}

// The daemon reads a sandbox's layers as root to diff them: a link the
// sandbox made, to a host file or through a directory, is never followed,
// so a diff shows no host file's content; a checkpoint id is no path; and
// another workspace's key reaches none of it.
func TestAttackCheckpointLinks(t *testing.T) {
	t.Parallel()
	requireBtrfs(t)
	d := startDaemon(t)
	ctx := t.Context()
	// A file only the host's root may read, outside every sandbox.
	secret := filepath.Join(d.dataDir, "host-secret")
	if err := os.WriteFile(secret, []byte("host secret 42\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sb := d.create(client.CreateSandboxRequest{})
	cwd := strings.TrimSpace(d.exec(sb.ID, "pwd").Stdout)
	if res := d.exec(sb.ID, "echo mine > notes.txt && ln -s "+secret+" escape && ln -s "+d.dataDir+" up"); res.ExitCode != 0 {
		t.Fatalf("make the links: %+v", res)
	}
	cp, err := d.client.CreateCheckpoint(ctx, sb.ID, client.CheckpointRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if res := d.exec(sb.ID, "rm notes.txt escape && ln -s /etc/shadow escape && echo other > notes.txt"); res.ExitCode != 0 {
		t.Fatalf("change the links: %+v", res)
	}
	var ce *client.Error
	for _, p := range []string{cwd + "/escape", cwd + "/up/host-secret", cwd + "/../../../.." + secret} {
		diff, err := d.client.DiffCheckpoint(ctx, sb.ID, cp.ID, p)
		if strings.Contains(diff.Unified, "host secret") || err != nil && strings.Contains(err.Error(), "host secret") {
			t.Errorf("the diff of %s shows the host's file: %+v, %v", p, diff, err)
		}
		if err == nil && diff.Unified != "" {
			t.Errorf("the diff of %s: %q", p, diff.Unified)
		}
	}
	// The link itself is listed as changed, its target never read.
	diff, err := d.client.DiffCheckpoint(ctx, sb.ID, cp.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range diff.Changes {
		found = found || c.Path == cwd+"/escape" && c.Kind == "changed" && c.Type == "symlink"
	}
	if !found {
		t.Errorf("the changed link is not listed: %+v", diff.Changes)
	}
	for _, bad := range []string{"..", "../c1", "c1/../c1", "%2e%2e", "c0", "c01"} {
		if _, err := d.client.DiffCheckpoint(ctx, sb.ID, bad, ""); !errors.As(err, &ce) || ce.StatusCode != http.StatusNotFound && ce.StatusCode != http.StatusBadRequest {
			t.Errorf("checkpoint %q: %v, want 404 or 400", bad, err)
		}
	}
	// Another workspace's key.
	other := d.keyClient(t, "other", "other", "", &recorder{})
	if _, err := other.ListCheckpoints(ctx, sb.ID); !errors.As(err, &ce) || ce.StatusCode != http.StatusNotFound {
		t.Errorf("another workspace lists the checkpoints: %v, want 404", err)
	}
	if _, err := other.RollbackCheckpoint(ctx, sb.ID, cp.ID, client.RollbackRequest{}); !errors.As(err, &ce) || ce.StatusCode != http.StatusNotFound {
		t.Errorf("another workspace rolls back: %v, want 404", err)
	}
	if _, err := other.CreateCheckpoint(ctx, sb.ID, client.CheckpointRequest{}); !errors.As(err, &ce) || ce.StatusCode != http.StatusNotFound {
		t.Errorf("another workspace takes a checkpoint: %v, want 404", err)
	}
}

// The official MCP client makes three tool calls in a sandbox with
// checkpoints per tool call and undoes the second: what the second
// changed goes back (its new file gone, its change to the first's file
// undone), the first's and the third's stay, and nothing restarted.
func TestMCPUndo(t *testing.T) {
	t.Parallel()
	requireBtrfs(t)
	dir := filepath.Dir(mcpClient(t))
	script, err := os.ReadFile("testdata/mcp-undo.mjs")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "mcp-undo.mjs")
	if err := os.WriteFile(path, script, 0o644); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t)
	out := runNode(t, []string{"HUTCH_API_KEY=" + d.key}, path, "http://"+d.addr+"/mcp")
	type result struct {
		IsError bool
		Text    string
	}
	var got struct {
		ID                                        string
		First, Second, Third, Undone, After, Diff result
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the client's output %q: %v", out, err)
	}
	d.sandboxIDs = append(d.sandboxIDs, got.ID)
	for name, r := range map[string]result{"first": got.First, "second": got.Second, "third": got.Third} {
		if r.IsError || !strings.Contains(r.Text, `"undo_checkpoint":"c`) {
			t.Errorf("the %s call's result names no checkpoint: %+v", name, r)
		}
	}
	if got.Undone.IsError || !strings.Contains(got.Undone.Text, "second.txt") || !strings.Contains(got.Undone.Text, "first.txt") {
		t.Errorf("the undo: %+v", got.Undone)
	}
	if got.After.IsError || got.After.Text == "" {
		t.Fatalf("after the undo: %+v", got.After)
	}
	var after struct{ Stdout string }
	if err := json.Unmarshal([]byte(got.After.Text), &after); err != nil {
		t.Fatal(err)
	}
	if after.Stdout != "one\nsecond-gone\nthree\n" {
		t.Errorf("after undoing the second call the files say %q, want the first's and the third's only", after.Stdout)
	}
	if got.Diff.IsError || !strings.Contains(got.Diff.Text, "third.txt") || strings.Contains(got.Diff.Text, "second.txt") {
		t.Errorf("the diff since before the first call: %+v", got.Diff)
	}
	sb, err := d.client.GetSandbox(t.Context(), got.ID)
	if err != nil || sb.Checkpoints != "per_tool_call" || sb.StateReason != "created" {
		t.Errorf("the sandbox: %+v, %v; want per_tool_call, never restarted", sb, err)
	}
}
