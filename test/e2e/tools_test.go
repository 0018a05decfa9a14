package e2e

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
)

// toolCall calls a tool through the SDK and decodes its result into out
// (when not nil); it returns the call's status and failure.
func (d *daemon) toolCall(t *testing.T, id, name string, args any, out any) *client.ToolResult {
	t.Helper()
	res, err := d.client.RunTool(t.Context(), id, name, args)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if out != nil && len(res.Result) > 0 {
		if err := json.Unmarshal(res.Result, out); err != nil {
			t.Fatalf("%s: decode %s: %v", name, res.Result, err)
		}
	}
	return res
}

// The tool catalogue through REST under each runtime: the file tools act
// on the sandbox's own files, inside it (a symlink to a host path finds
// nothing), what they write is the user's, a patch with one bad hunk
// changes nothing, and commands report failures and timeouts by kind.
func TestTools(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	list, err := d.client.ListTools(t.Context())
	if err != nil || len(list) < 7 || list[0].Name != "sandbox_read_file" || !json.Valid(list[0].InputSchema) {
		t.Fatalf("tools: %+v, %v", list, err)
	}
	// A file only the host has, which a symlink in the sandbox names.
	hostOnly := filepath.Join(t.TempDir(), "host-secret")
	if err := os.WriteFile(hostOnly, []byte("host"), 0o600); err != nil {
		t.Fatal(err)
	}
	forEachRuntime(t, func(t *testing.T, runtime string) {
		sb := d.create(client.CreateSandboxRequest{Runtime: runtime})
		var written struct {
			Path    string `json:"path"`
			Created bool   `json:"created"`
		}
		if res := d.toolCall(t, sb.ID, "sandbox_write_file", map[string]string{"path": "src/app.py", "content": "x = 1\r\nprint(x)"}, &written); res.Status != client.ToolSuccess || written.Path != "/home/user/workspace/src/app.py" || !written.Created {
			t.Fatalf("write: %+v %+v", res, written)
		}
		var read struct {
			Content        string `json:"content"`
			LineEndings    string `json:"line_endings"`
			NoFinalNewline bool   `json:"no_final_newline"`
		}
		d.toolCall(t, sb.ID, "sandbox_read_file", map[string]string{"path": "src/app.py"}, &read)
		if read.Content != "     1\tx = 1\n     2\tprint(x)\n" || read.LineEndings != "crlf" || !read.NoFinalNewline {
			t.Errorf("read: %+v", read)
		}
		if res := d.exec(sb.ID, "stat -c %U src src/app.py"); res.Stdout != "user\nuser\n" {
			t.Errorf("owners of what the tools made: %+v", res)
		}
		if res := d.toolCall(t, sb.ID, "sandbox_find_replace", map[string]any{"path": "src/app.py", "find": "x = 1", "replace": "x = 2"}, nil); res.Status != client.ToolSuccess {
			t.Errorf("find_replace: %+v", res)
		}
		var grep struct {
			Matches []struct {
				Path string
				Line int
			}
			Engine string
		}
		d.toolCall(t, sb.ID, "sandbox_grep_files", map[string]any{"pattern": `x = \d`}, &grep)
		if len(grep.Matches) != 1 || grep.Matches[0].Path != "src/app.py" || grep.Matches[0].Line != 1 || grep.Engine == "" {
			t.Errorf("grep: %+v", grep)
		}
		var found struct{ Files []struct{ Path string } }
		d.toolCall(t, sb.ID, "sandbox_find_files", map[string]any{"query": "apppy"}, &found)
		if len(found.Files) != 1 || found.Files[0].Path != "src/app.py" {
			t.Errorf("find: %+v", found)
		}

		// A symlink out of the sandbox finds the sandbox's own tree.
		d.exec(sb.ID, "ln -s "+hostOnly+" host-link && ln -s /etc/hostname name-link")
		if res := d.toolCall(t, sb.ID, "sandbox_read_file", map[string]string{"path": "host-link"}, nil); res.Error == nil || res.Error.Kind != "not_found" {
			t.Errorf("a symlink to a host file: %+v, want not_found", res)
		}
		d.toolCall(t, sb.ID, "sandbox_read_file", map[string]string{"path": "name-link"}, &read)
		if read.Content != "     1\t"+sb.ID+"\n" {
			t.Errorf("a symlink to /etc/hostname reads %q, want the sandbox's", read.Content)
		}
		if res := d.toolCall(t, sb.ID, "sandbox_read_file", map[string]string{"path": "../../../../../../" + hostOnly}, nil); res.Error == nil || res.Error.Kind != "not_found" {
			t.Errorf("a path out of the workspace to a host file: %+v, want not_found", res)
		}

		// Three files, one bad hunk: nothing changes.
		d.exec(sb.ID, "printf 'a\\nb\\n' > one.txt && printf 'c\\nd\\n' > two.txt")
		bad := "--- a/one.txt\n+++ b/one.txt\n@@ -1,2 +1,2 @@\n a\n-b\n+B\n" +
			"--- /dev/null\n+++ b/three.txt\n@@ -0,0 +1 @@\n+new\n" +
			"--- a/two.txt\n+++ b/two.txt\n@@ -1,2 +1,2 @@\n c\n-x\n+X\n"
		res := d.toolCall(t, sb.ID, "sandbox_apply_patch", map[string]string{"patch": bad}, nil)
		if res.Error == nil || res.Error.Kind != "invalid_argument" || !strings.Contains(res.Error.Message, "two.txt") {
			t.Errorf("a bad patch: %+v", res)
		}
		if out := d.exec(sb.ID, "cat one.txt two.txt; ls three.txt 2>&1 | grep -c 'No such'"); out.Stdout != "a\nb\nc\nd\n1\n" {
			t.Errorf("files after a bad patch: %+v", out)
		}
		good := strings.Replace(bad, "-x\n+X", "-d\n+D", 1)
		if res := d.toolCall(t, sb.ID, "sandbox_apply_patch", map[string]string{"patch": good}, nil); res.Status != client.ToolSuccess {
			t.Errorf("a good patch: %+v", res)
		}
		if out := d.exec(sb.ID, "cat one.txt two.txt three.txt"); out.Stdout != "a\nB\nc\nD\nnew\n" {
			t.Errorf("files after a good patch: %+v", out)
		}

		var listed struct {
			Entries []struct{ Path, Type string }
		}
		d.toolCall(t, sb.ID, "sandbox_list_directory", map[string]any{"depth": 2}, &listed)
		if len(listed.Entries) < 6 {
			t.Errorf("list: %+v", listed)
		}
		if res := d.toolCall(t, sb.ID, "sandbox_delete_file", map[string]any{"path": "src"}, nil); res.Error == nil || res.Error.Kind != "invalid_argument" {
			t.Errorf("delete of a full directory, not recursive: %+v", res)
		}
		if res := d.toolCall(t, sb.ID, "sandbox_delete_file", map[string]any{"path": "src", "recursive": true}, nil); res.Status != client.ToolSuccess {
			t.Errorf("recursive delete: %+v", res)
		}

		var ran struct {
			ExitCode int    `json:"exit_code"`
			Stdout   string `json:"stdout"`
		}
		if res := d.toolCall(t, sb.ID, "sandbox_run_command", map[string]any{"command": "echo $((6*7)); whoami"}, &ran); res.Status != client.ToolSuccess || ran.Stdout != "42\nuser\n" {
			t.Errorf("run_command: %+v %+v", res, ran)
		}
		if res := d.toolCall(t, sb.ID, "sandbox_run_command", map[string]any{"command": "echo out; exit 3"}, &ran); res.Error == nil || res.Error.Kind != "command_failed" || ran.ExitCode != 3 || ran.Stdout != "out\n" {
			t.Errorf("a failing command: %+v %+v", res, ran)
		}
		if res := d.toolCall(t, sb.ID, "sandbox_run_command", map[string]any{"command": "echo before; sleep 30", "timeout_s": 1}, &ran); res.Error == nil || res.Error.Kind != "timeout" || ran.Stdout != "before\n" {
			t.Errorf("a command past its timeout: %+v %+v", res, ran)
		}
		if res := d.toolCall(t, sb.ID, "sandbox_run_command", map[string]any{"command": "true", "timeout_s": 99999}, nil); res.Error == nil || res.Error.Kind != "invalid_argument" {
			t.Errorf("a timeout over the bound: %+v", res)
		}
	})
	if _, err := d.client.RunTool(t.Context(), "nosuchsandbox", "sandbox_read_file", map[string]string{"path": "x"}); !client.IsNotFound(err) {
		t.Errorf("a tool in an unknown sandbox: %v", err)
	}
}

// A tool call with Accept: text/event-stream sends tool.call, the
// command's output as tool.output, and tool.message; the CLI calls tools
// too.
func TestToolEventsAndCLI(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	sb := d.create(client.CreateSandboxRequest{})
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+d.addr+"/v1/sandboxes/"+sb.ID+"/tools/sandbox_run_command",
		strings.NewReader(`{"command": "echo one; echo two >&2"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+d.key)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var events []string
	var last string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if name, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
			events = append(events, name)
		}
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			last = data
		}
	}
	if len(events) < 3 || events[0] != "tool.call" || events[len(events)-1] != "tool.message" || !strings.Contains(strings.Join(events, " "), "tool.output") {
		t.Errorf("events %v", events)
	}
	var msg client.ToolResult
	if err := json.Unmarshal([]byte(last), &msg); err != nil || msg.Status != client.ToolSuccess || !strings.Contains(string(msg.Result), `"stdout":"one\n"`) {
		t.Errorf("tool.message %s: %v", last, err)
	}

	if out, stderr, code := d.cli("", "tool", "run", sb.ID, "sandbox_write_file", `{"path": "cli.txt", "content": "from the CLI\n"}`); code != 0 || !strings.Contains(out, `"status": "success"`) {
		t.Errorf("hutch tool run: %d %q %q", code, out, stderr)
	}
	if out, stderr, code := d.cli(`{"path": "cli.txt"}`, "tool", "run", sb.ID, "sandbox_read_file", "-"); code != 0 || !strings.Contains(out, `from the CLI`) {
		t.Errorf("hutch tool run with stdin: %d %q %q", code, out, stderr)
	}
	if _, stderr, code := d.cli("", "tool", "run", sb.ID, "sandbox_read_file", `{"path": "nope"}`); code != 1 || !strings.Contains(stderr, "not_found") {
		t.Errorf("a failing tool in the CLI: %d %q", code, stderr)
	}
	if out, _, code := d.cli("", "tool", "ls"); code != 0 || !strings.Contains(out, "sandbox_apply_patch") {
		t.Errorf("hutch tool ls: %d %q", code, out)
	}
}

// A download URL works without the API key, for its one path, until it
// expires; a directory comes packed, every entry inside it.
func TestDownloadURL(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	forEachRuntime(t, func(t *testing.T, runtime string) {
		sb := d.create(client.CreateSandboxRequest{Runtime: runtime})
		d.exec(sb.ID, "mkdir -p out/sub && echo a,b > out/report.csv && echo deep > out/sub/deep.txt && ln -s /etc/passwd out/passwd && ln -s sub/deep.txt out/inner")
		urlOf := func(args map[string]any) (string, *client.ToolResult) {
			var res struct{ URL, Type string }
			r := d.toolCall(t, sb.ID, "sandbox_download_url", args, &res)
			return res.URL, r
		}
		get := func(url string) (int, string, []byte) {
			resp, err := http.Get(url) // no API key
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, resp.Header.Get("Content-Disposition"), body
		}
		fileURL, _ := urlOf(map[string]any{"path": "out/report.csv"})
		if status, disp, body := get(fileURL); status != 200 || string(body) != "a,b\n" || !strings.Contains(disp, `filename=report.csv`) {
			t.Errorf("the file: %d %q %q", status, disp, body)
		}
		// Its signature over another path's claim: refused.
		otherURL, _ := urlOf(map[string]any{"path": "out/sub/deep.txt"})
		otherClaim, _, _ := strings.Cut(path.Base(otherURL), ".")
		_, fileSig, _ := strings.Cut(path.Base(fileURL), ".")
		forged := "http://" + d.addr + "/v1/downloads/" + otherClaim + "." + fileSig
		if status, _, body := get(forged); status != 401 || !strings.Contains(string(body), "not valid") {
			t.Errorf("a forged URL: %d %s", status, body)
		}
		shortURL, _ := urlOf(map[string]any{"path": "out/report.csv", "expires_in_s": 1})
		time.Sleep(1100 * time.Millisecond)
		if status, _, body := get(shortURL); status != 401 || !strings.Contains(string(body), "expired") {
			t.Errorf("an expired URL: %d %s", status, body)
		}
		dirURL, _ := urlOf(map[string]any{"path": "out"})
		status, disp, body := get(dirURL)
		if status != 200 || !strings.Contains(disp, "out.tar.gz") {
			t.Fatalf("the directory: %d %q", status, disp)
		}
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		tr := tar.NewReader(zr)
		for {
			hdr, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, hdr.Name)
			if !strings.HasPrefix(hdr.Name, "out/") || strings.Contains(hdr.Name, "..") {
				t.Errorf("entry %q could land outside", hdr.Name)
			}
		}
		if got := strings.Join(names, " "); got != "out/ out/inner out/report.csv out/sub/ out/sub/deep.txt" {
			t.Errorf("entries %s (the symlink to /etc/passwd left out)", got)
		}
		zipURL, _ := urlOf(map[string]any{"path": "out", "format": "zip"})
		if status, disp, body := get(zipURL); status != 200 || !strings.Contains(disp, "out.zip") || !bytes.HasPrefix(body, []byte("PK")) {
			t.Errorf("the directory as zip: %d %q", status, disp)
		}
		if _, res := urlOf(map[string]any{"path": "nope"}); res.Error == nil || res.Error.Kind != "not_found" {
			t.Errorf("a URL of nothing: %+v", res)
		}
	})
}

// Sandbox modes: off runs tool calls on the host, in the directory the
// daemon allows, with nothing of the daemon's environment; selective sends
// only risky calls to the sandbox, saying why; without a host directory
// both are refused.
func TestToolModes(t *testing.T) {
	t.Parallel()
	strict := startDaemon(t)
	sb := strict.create(client.CreateSandboxRequest{})
	for _, mode := range []string{"off", "selective"} {
		_, err := strict.client.RunTool(t.Context(), sb.ID, "sandbox_run_command", map[string]string{"command": "true"}, client.InMode(mode))
		if !client.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "--tools-host-dir") {
			t.Errorf("mode %s on a daemon that allows no host: %v", mode, err)
		}
	}

	host := toolsHostDir(t)
	d := startDaemonWith(t, "--tools-host-dir", host)
	sb = d.create(client.CreateSandboxRequest{})
	run := func(mode, tool string, args any) *client.ToolResult {
		t.Helper()
		res, err := d.client.RunTool(t.Context(), sb.ID, tool, args, client.InMode(mode))
		if err != nil {
			t.Fatalf("%s %s: %v", mode, tool, err)
		}
		return res
	}
	if res := run("off", "sandbox_write_file", map[string]string{"path": "on-host.txt", "content": "host\n"}); res.Status != client.ToolSuccess || res.RanOn != "host" {
		t.Errorf("off, write: %+v", res)
	}
	if b, err := os.ReadFile(filepath.Join(host, "on-host.txt")); err != nil || string(b) != "host\n" {
		t.Errorf("the file written on the host: %q, %v", b, err)
	}
	if res := d.exec(sb.ID, "ls on-host.txt"); res.ExitCode == 0 {
		t.Error("mode off wrote in the sandbox")
	}
	var ran struct{ Stdout string }
	res := run("off", "sandbox_run_command", map[string]string{"command": "pwd; echo ${HUTCH_API_KEY:-no key}"})
	if err := json.Unmarshal(res.Result, &ran); err != nil || res.RanOn != "host" || ran.Stdout != host+"\nno key\n" {
		t.Errorf("off, a command: %+v %q %v", res, ran.Stdout, err)
	}
	// Selective: this is safe, on the host; installing is not.
	if res := run("selective", "sandbox_run_command", map[string]string{"command": "cat on-host.txt"}); res.RanOn != "host" || !strings.Contains(string(res.Result), `host\n`) {
		t.Errorf("selective, a safe command: %+v", res)
	}
	res = run("selective", "sandbox_run_command", map[string]string{"command": "pip install nothing-here; hostname"})
	if res.RanOn != "sandbox" || !strings.Contains(res.Why, "installs packages") || !strings.Contains(string(res.Result), sb.ID) {
		t.Errorf("selective, an install: %+v", res)
	}
	if res := run("selective", "sandbox_write_file", map[string]string{"path": "/etc/hutch-mode-test", "content": "x"}); res.RanOn != "sandbox" || !strings.Contains(res.Why, "outside the workspace") {
		t.Errorf("selective, a write out of the workspace: %+v", res)
	}
	if _, err := os.Stat("/etc/hutch-mode-test"); err == nil {
		t.Error("selective wrote /etc on the host")
	}
	if res := run("all", "sandbox_run_command", map[string]string{"command": "hostname"}); res.RanOn != "sandbox" {
		t.Errorf("all: %+v", res)
	}
	if _, err := d.client.RunTool(t.Context(), sb.ID, "sandbox_read_file", map[string]string{"path": "x"}, client.InMode("sometimes")); !client.IsInvalidArgument(err) {
		t.Errorf("an unknown mode: %v", err)
	}
}

// API keys carry a sandbox mode: a key's calls get it when they name none,
// may ask for a more isolated one, never a less isolated one; only the
// daemon's own key manages keys, and a removed key works no more.
func TestAPIKeyModes(t *testing.T) {
	t.Parallel()
	host := toolsHostDir(t)
	d := startDaemonWith(t, "--tools-host-dir", host)
	out, stderr, code := d.cli("", "key", "create", "editor", "--tools-mode", "selective", "--workspace", "app")
	if code != 0 || !strings.HasPrefix(out, "hutch_") {
		t.Fatalf("hutch key create: %d %q %q", code, out, stderr)
	}
	editor, err := client.New("http://"+d.addr, strings.TrimSpace(out))
	if err != nil {
		t.Fatal(err)
	}
	locked, err := d.client.CreateAPIKeyWith(t.Context(), client.CreateAPIKeyRequest{Name: "locked", Workspace: "app"})
	if err != nil || locked.ToolsMode != "all" || locked.Key == "" {
		t.Fatalf("a key with the default mode: %+v, %v", locked, err)
	}
	lockedClient, err := client.New("http://"+d.addr, locked.Key)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := editor.CreateSandbox(t.Context(), client.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	d.sandboxIDs = append(d.sandboxIDs, sb.ID)
	safe := map[string]string{"command": "pwd"}
	for _, tc := range []struct {
		who    *client.Client
		name   string
		mode   string
		ranOn  string
		denied bool
	}{
		{editor, "editor, no mode", "", "host", false},
		{editor, "editor, all", "all", "sandbox", false},
		{editor, "editor, off", "off", "", true},
		{lockedClient, "locked, no mode", "", "sandbox", false},
		{lockedClient, "locked, selective", "selective", "", true},
		{d.client, "the owner, off", "off", "host", false},
	} {
		var opts []client.ToolOption
		if tc.mode != "" {
			opts = append(opts, client.InMode(tc.mode))
		}
		res, err := tc.who.RunTool(t.Context(), sb.ID, "sandbox_run_command", safe, opts...)
		switch {
		case tc.denied && !client.IsPermissionDenied(err):
			t.Errorf("%s: %+v, %v; want permission_denied", tc.name, res, err)
		case !tc.denied && (err != nil || res.RanOn != tc.ranOn):
			t.Errorf("%s: %+v, %v; want it run on the %s", tc.name, res, err, tc.ranOn)
		}
	}
	if _, err := editor.CreateAPIKey(t.Context(), "escalate", "off"); !client.IsPermissionDenied(err) {
		t.Errorf("a key making keys: %v, want permission_denied", err)
	}
	keys, err := d.client.ListAPIKeys(t.Context())
	if err != nil || len(keys) != 2 || keys[0].Name != "editor" || keys[0].Key != "" {
		t.Errorf("keys: %+v, %v", keys, err)
	}
	if _, stderr, code := d.cli("", "key", "rm", "editor"); code != 0 {
		t.Fatalf("hutch key rm: %d %q", code, stderr)
	}
	if _, err := editor.ListSandboxes(t.Context()); !client.IsUnauthenticated(err) {
		t.Errorf("a removed key: %v, want unauthenticated", err)
	}
}

// toolsHostDir is a directory for --tools-host-dir: host tool calls run as
// its owner, never root (internal/core/toolrun), so it belongs to nobody
// (65534), and the way to it is open to be searched.
func toolsHostDir(t *testing.T) string {
	t.Helper()
	host := t.TempDir()
	if err := os.Chown(host, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(host), 0o711); err != nil {
		t.Fatal(err)
	}
	return host
}
