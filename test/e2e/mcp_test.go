package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// mcpSDKVersion is the MCP TypeScript SDK the test's client is made with.
const mcpSDKVersion = "1.32.2"

var mcpInstall sync.Mutex

// mcpClient installs the official MCP TypeScript SDK (once, into bin/ of
// the repository) beside testdata/mcp-client.mjs and returns the script's
// path there.
func mcpClient(t *testing.T) string {
	t.Helper()
	// Tests that use it run side by side: one installs, the others wait.
	mcpInstall.Lock()
	defer mcpInstall.Unlock()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the MCP test needs %s: ./setup --deps installs it", tool)
		}
	}
	dir, err := filepath.Abs("../../bin/mcp-client")
	if err != nil {
		t.Fatal(err)
	}
	sdk := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk", "package.json")
	if b, err := os.ReadFile(sdk); err != nil || !strings.Contains(string(b), `"version": "`+mcpSDKVersion+`"`) {
		cmd := exec.CommandContext(t.Context(), "npm", "install", "--prefix", dir, "--no-audit", "--no-fund", "--loglevel=error",
			"@modelcontextprotocol/sdk@"+mcpSDKVersion)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm install the MCP SDK: %v\n%s", err, out)
		}
	}
	script, err := os.ReadFile("testdata/mcp-client.mjs")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "mcp-client.mjs")
	if err := os.WriteFile(path, script, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// runNode runs a script of node with env added to the test's, and returns
// its stdout; a failure ends the test with its stderr.
func runNode(t *testing.T, env []string, script string, args ...string) []byte {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "node", append([]string{script}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("node %s: %v\n%s", filepath.Base(script), err, stderr)
	}
	return out
}

// The real MCP client of npm drives `hutch mcp` (stdio) and the daemon's
// /mcp (streamable HTTP): the tools are listed with their schemas, a
// sandbox is made, a file written and read in it, and failures come back
// as tool errors with their kind.
func TestMCP(t *testing.T) {
	t.Parallel()
	script := mcpClient(t)
	d := startDaemon(t)
	for _, tc := range []struct{ mode, target string }{
		{"stdio", hutchBin},
		{"http", "http://" + d.addr + "/mcp"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			out := runNode(t, []string{"HUTCH_URL=http://" + d.addr, "HUTCH_API_KEY=" + d.key}, script, tc.mode, tc.target)
			var got struct {
				Tools            []string
				ReadFileRequires []string
				ID               string
				Write, Read      struct {
					IsError bool
					Text    string
				}
				Missing, Command struct {
					IsError bool
					Text    string
				}
				Listed string
				Others map[string]struct {
					IsError bool
					Text    string
				}
				Code struct {
					IsError bool
					Text    string
					Images  []struct{ MimeType, Data string }
				}
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("the client's output %q: %v", out, err)
			}
			if got.ID != "" {
				d.sandboxIDs = append(d.sandboxIDs, got.ID)
			}
			for _, want := range []string{"sandbox_create", "sandbox_list", "sandbox_read_file", "sandbox_apply_patch", "sandbox_run_command"} {
				if !slices.Contains(got.Tools, want) {
					t.Errorf("tools %v lack %s", got.Tools, want)
				}
			}
			if !slices.Contains(got.ReadFileRequires, "sandbox_id") || !slices.Contains(got.ReadFileRequires, "path") {
				t.Errorf("sandbox_read_file requires %v", got.ReadFileRequires)
			}
			if got.Write.IsError || got.Read.IsError || !strings.Contains(got.Read.Text, `1\tover `+tc.mode) {
				t.Errorf("write %+v, then read %+v", got.Write, got.Read)
			}
			if !got.Missing.IsError || !strings.HasPrefix(got.Missing.Text, "not_found: ") {
				t.Errorf("a missing file: %+v", got.Missing)
			}
			if !got.Command.IsError || !strings.HasPrefix(got.Command.Text, "command_failed: ") || !strings.Contains(got.Command.Text, `"exit_code":4`) {
				t.Errorf("a failing command: %+v", got.Command)
			}
			if !strings.Contains(got.Listed, got.ID) {
				t.Errorf("sandbox_list %s lacks %s", got.Listed, got.ID)
			}
			if c := got.Code; c.IsError || !strings.Contains(c.Text, `"text":"42"`) || len(c.Images) != 1 || c.Images[0].MimeType != "image/png" {
				t.Errorf("sandbox_run_code: %+v", c)
			} else if img, err := base64.StdEncoding.DecodeString(c.Images[0].Data); err != nil {
				t.Errorf("sandbox_run_code's image: %v", err)
			} else if cfg, err := png.DecodeConfig(bytes.NewReader(img)); err != nil || cfg.Width != 2 || cfg.Height != 3 {
				t.Errorf("sandbox_run_code's image: %+v, %v", cfg, err)
			}
			for name, want := range map[string]string{
				"sandbox_find_replace":   `"replacements":1`,
				"sandbox_apply_patch":    `"action":"added"`,
				"sandbox_list_directory": `"path":"added.txt"`,
				"sandbox_grep_files":     `"path":"mcp.txt"`,
				"sandbox_find_files":     `"path":"added.txt"`,
				"sandbox_download_url":   `/v1/downloads/`,
				"sandbox_delete_file":    `"type":"file"`,
			} {
				if res, ok := got.Others[name]; !ok || res.IsError || !strings.Contains(res.Text, want) {
					t.Errorf("%s: %+v, want success saying %s", name, res, want)
				}
			}
		})
	}
	// /mcp takes the API key as every route does.
	cmd := exec.CommandContext(t.Context(), "node", script, "http", "http://"+d.addr+"/mcp")
	cmd.Env = append(os.Environ(), "HUTCH_API_KEY=wrong")
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Errorf("an MCP client with a wrong key got in: %s", out)
	}
}
