package api

import (
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
)

// One workspace's key on another's objects: every route of the API
// (walked from api/openapi.yaml, so that a new route without a check here
// fails) answers 404, lists nothing of the other's, and changes nothing.
func TestWorkspacesIsolated(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("the fake backend's agent needs root: it starts commands as the sandbox user")
	}
	s := newTestServer(t)
	ctx := t.Context()
	a, b := s.keyIn(t, "app-a", "ws-a"), s.keyIn(t, "app-b", "ws-b")
	if _, err := s.client.CreateAPIKeyWith(ctx, client.CreateAPIKeyRequest{Name: "app-a2", Workspace: "ws-a"}); err != nil {
		t.Fatal(err)
	}

	// Workspace ws-a's objects, each named so that it can be looked for
	// in what ws-b's key reads.
	sb, err := a.CreateSandbox(ctx, client.CreateSandboxRequest{Key: "shared-key"})
	if err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(s.be.Root(sb.ID), rootfs.Workspace)
	file := filepath.Join(work, "a.txt")
	if _, err := a.WriteFile(ctx, sb.ID, file, strings.NewReader("ws-a's file")); err != nil {
		t.Fatal(err)
	}
	if _, err := a.StartProcess(ctx, sb.ID, client.StartProcessRequest{Name: "proc-a7", Cmd: []string{"sleep", "300"}, Cwd: work}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.CreateVolume(ctx, "vola-7"); err != nil {
		t.Fatal(err)
	}
	snap, err := a.SnapshotSandbox(ctx, sb.ID, "snapa-7")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.SetSecret(ctx, client.SetSecretRequest{Name: "TOKEN_A7", Value: "ws-a-secret-value"}); err != nil {
		t.Fatal(err)
	}
	dl, err := a.RunTool(ctx, sb.ID, "sandbox_download_url", map[string]any{"path": file})
	if err != nil || dl.Error != nil {
		t.Fatalf("download URL: %+v, %v", dl, err)
	}
	var link struct {
		URL string `json:"url"`
	}
	if err := json.Unmarshal(dl.Result, &link); err != nil {
		t.Fatal(err)
	}
	token := link.URL[strings.LastIndex(link.URL, "/")+1:]
	hook, err := a.CreateWebhook(ctx, client.CreateWebhookRequest{URL: "https://hooks.example.com/a7"})
	if err != nil {
		t.Fatal(err)
	}
	// What ws-b's key must never read.
	marks := []string{sb.ID, "proc-a7", "vola-7", "snapa-7", "TOKEN_A7", "app-a2", `"ws-a"`, "ws-a's file", hook.ID, "hooks.example.com/a7"}

	// The object each path parameter names, by the path's start.
	params := func(path string) string {
		r := strings.NewReplacer("{id}", sb.ID, "{token}", token, "{w}", "ws-a", "{webhook}", hook.ID, "{checkpoint}", "c1")
		switch {
		case strings.Contains(path, "/processes/{name}"), strings.Contains(path, "/services/{name}"):
			path = strings.Replace(path, "{name}", "proc-a7", 1)
		case strings.Contains(path, "/contexts/{context}"):
			path = strings.Replace(path, "{context}", "ctx-a7", 1)
		case strings.Contains(path, "/ports/{port}/{path}"):
			path = strings.Replace(strings.Replace(path, "{port}", "3000", 1), "{path}", "", 1)
		case strings.Contains(path, "/tools/{name}"):
			path = strings.Replace(path, "{name}", "sandbox_read_file", 1)
		case strings.HasPrefix(path, "/v1/volumes/"):
			path = strings.Replace(path, "{name}", "vola-7", 1)
		case strings.HasPrefix(path, "/v1/templates/"):
			path = strings.Replace(path, "{name}", "snapa-7", 1)
		case strings.HasPrefix(path, "/v1/keys/"):
			path = strings.Replace(path, "{name}", "app-a2", 1)
		case strings.HasPrefix(path, "/v1/secrets/"):
			path = strings.Replace(path, "{name}", "TOKEN_A7", 1)
		}
		path = r.Replace(path)
		if strings.Contains(path, "{") {
			t.Fatalf("%s: a path parameter this test does not know; say which object it names", path)
		}
		if strings.Contains(path, "/files") {
			path += "?path=" + url.QueryEscape(file)
		}
		return path
	}

	// Routes without a path parameter: what each is called with, and
	// what it must answer. Every one in the document must be here.
	type call struct {
		body string
		want int // 0: any status, as long as nothing of ws-a's is read or changed
	}
	plain := map[string][]call{
		"GET /v1/health":       {{want: 200}},
		"GET /v1/whoami":       {{want: 200}},
		"GET /v1/nodes":        {{want: 403}},
		"GET /v1/e2b":          {{want: 200}},
		"GET /v1/openapi.yaml": {{want: 200}},
		"GET /v1/tools":        {{want: 200}},
		"GET /v1/sandboxes":    {{want: 200}},
		"GET /v1/volumes":      {{want: 200}},
		"GET /v1/templates":    {{want: 200}},
		"GET /v1/keys":         {{want: 200}},
		"GET /v1/secrets":      {{want: 200}},
		"GET /v1/workspaces":   {{want: 200}},
		"GET /v1/audit":        {{want: 200}},
		"GET /metrics":         {{want: 403}},
		"GET /v1/events":       {{want: 200}},
		"GET /v1/webhooks":     {{want: 200}},
		"POST /v1/webhooks":    {{body: `{"url":"https://hooks.example.com/b"}`, want: 201}},
		"POST /v1/sandboxes": {
			{body: `{"template":"snapa-7"}`, want: 404},
			{body: `{"from_snapshot":"snapa-7"}`, want: 404},
			{body: `{"volumes":[{"name":"vola-7"}]}`, want: 404},
			{body: `{"template":"snapa-7~ws-a"}`, want: 404},
			// The same key in another workspace is another sandbox.
			{body: `{"key":"shared-key"}`, want: 201},
		},
		"POST /v1/volumes":               {{body: `{"name":"vola-7~ws-a"}`, want: 400}, {body: `{"name":"vola-7"}`, want: 201}},
		"POST /v1/keys":                  {{body: `{"name":"intruder","workspace":"ws-a"}`, want: 404}},
		"POST /v1/secrets":               {{body: `{"name":"TOKEN_A7","value":"ws-b's own value"}`, want: 201}},
		"POST /v1/templates":             {{body: `{"name":"snapa-7~ws-a"}`, want: 400}, {body: `{"name":"x","hutchfile":"FROM snapa-7\n"}`, want: 404}},
		"POST /v1/secrets/rotate-master": {{want: 403}},
		"POST /mcp":                      {}, // an MCP session, below
	}
	// Routes with one, whose answer is not 404: they make ws-b's own, or
	// are the administrator's alone (403).
	own := map[string]bool{
		"POST /v1/templates/{name}/import": true, // an empty body: 400, and ws-a's snapa-7 untouched
		"GET /v1/templates/{name}/archive": true, // nodes copy templates with the daemon's key
	}

	// First what ws-b's key reads, before it made anything; then each
	// route that names an object; then the rest, which make ws-b's own
	// (in a fixed order: those routes first, so that a name of ws-a's
	// is not found for having become ws-b's).
	ops := openAPIOperations(t)
	for _, op := range ops {
		if calls, ok := plain[op]; ok && strings.HasPrefix(op, "GET ") {
			for _, c := range calls {
				status, body := b.raw(t, "GET", strings.TrimPrefix(op, "GET "), "")
				if status != c.want {
					t.Errorf("%s: %d %s, want %d", op, status, body, c.want)
				}
				for _, m := range marks {
					if strings.Contains(body, m) {
						t.Errorf("%s: the answer holds %s of workspace ws-a: %s", op, m, body)
					}
				}
			}
		}
	}
	for _, op := range ops {
		method, path, _ := strings.Cut(op, " ")
		if !strings.Contains(path, "{") {
			if _, ok := plain[op]; !ok {
				t.Errorf("%s: no isolation check for this route; add it to this test", op)
			}
			continue
		}
		body := ""
		if method != http.MethodGet && method != http.MethodDelete {
			body = "{}"
		}
		status, got := b.raw(t, method, params(path), body)
		if own[op] {
			if status/100 == 2 {
				t.Errorf("%s: %d %s", op, status, got)
			}
			continue
		}
		if status != http.StatusNotFound || !strings.Contains(got, `"not_found"`) {
			t.Errorf("%s: %d %s, want 404 not_found", op, status, got)
		}
		for _, m := range marks {
			if strings.Contains(got, m) && !strings.Contains(params(path), strings.Trim(m, `"`)) {
				t.Errorf("%s: the answer holds %s of workspace ws-a: %s", op, m, got)
			}
		}
	}
	for _, op := range slices.Sorted(maps.Keys(plain)) {
		method, path, _ := strings.Cut(op, " ")
		if method == http.MethodGet {
			continue
		}
		for _, c := range plain[op] {
			status, body := b.raw(t, method, path, c.body)
			if status != c.want {
				t.Errorf("%s %s: %d %s, want %d", op, c.body, status, body, c.want)
			}
			for _, m := range marks {
				// A name it was given may come back: ws-b's own, or in
				// the error about it.
				if strings.Contains(body, m) && !strings.Contains(c.body, strings.Trim(m, `"`)) {
					t.Errorf("%s %s: the answer holds %s of workspace ws-a: %s", op, c.body, m, body)
				}
			}
			if status/100 == 2 && strings.Contains(body, `"workspace"`) && !strings.Contains(body, `"workspace":"ws-b"`) {
				t.Errorf("%s %s: made outside ws-b: %s", op, c.body, body)
			}
		}
	}
	// ws-b's audit log is ws-b's calls alone.
	if status, body := b.raw(t, "GET", "/v1/audit?limit=1000", ""); status != 200 || strings.Contains(body, `"workspace":"ws-a"`) || !strings.Contains(body, `"workspace":"ws-b"`) {
		t.Errorf("ws-b's audit log: %d %s", status, body)
	}

	// MCP: ws-b's session lists none of ws-a's sandboxes and reaches none.
	cs := b.mcp(t)
	list, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "sandbox_list", Arguments: map[string]any{}})
	if err != nil || strings.Contains(toolText(list), sb.ID) {
		t.Errorf("MCP sandbox_list for ws-b: %s, %v", toolText(list), err)
	}
	read, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "sandbox_read_file", Arguments: map[string]any{"sandbox_id": sb.ID, "path": file}})
	if err != nil || !read.IsError || strings.Contains(toolText(read), "ws-a's file") || !strings.Contains(toolText(read), "not found") {
		t.Errorf("MCP sandbox_read_file of ws-a's sandbox by ws-b: %s, %v", toolText(read), err)
	}

	// ws-a's session, presented with ws-b's key, is no session of ws-b's.
	as := a.mcp(t)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url+mcpPath,
		strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"sandbox_list","arguments":{}}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+b.key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", as.ID())
	if res, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else {
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusNotFound || strings.Contains(string(body), sb.ID) {
			t.Errorf("ws-a's MCP session with ws-b's key: %d %s; want 404", res.StatusCode, body)
		}
	}

	// Nothing of ws-a's changed.
	if got, err := a.GetSandbox(ctx, sb.ID); err != nil || got.State != client.StateRunning {
		t.Errorf("ws-a's sandbox after: %+v, %v", got, err)
	}
	if rc, err := a.ReadFile(ctx, sb.ID, file); err != nil {
		t.Errorf("ws-a's file after: %v", err)
	} else {
		content, _ := io.ReadAll(rc)
		rc.Close()
		if string(content) != "ws-a's file" {
			t.Errorf("ws-a's file after: %q", content)
		}
	}
	if procs, err := a.ListProcesses(ctx, sb.ID); err != nil || len(procs) != 1 || procs[0].Status != client.ProcessRunning {
		t.Errorf("ws-a's process after: %+v, %v", procs, err)
	}
	if vols, err := a.ListVolumes(ctx); err != nil || len(vols) != 1 || vols[0].Name != "vola-7" {
		t.Errorf("ws-a's volumes after: %+v, %v", vols, err)
	}
	if tm, err := a.GetTemplate(ctx, "snapa-7"); err != nil || tm.Version != snap.Version {
		t.Errorf("ws-a's snapshot after: %+v, %v", tm, err)
	}
	if keys, err := a.ListAPIKeys(ctx); err != nil || len(keys) != 2 {
		t.Errorf("ws-a's keys after: %+v, %v", keys, err)
	}
	if list, err := a.ListSecrets(ctx); err != nil || len(list) != 1 || list[0].Workspace != "ws-a" {
		t.Errorf("ws-a's secrets after: %+v, %v", list, err)
	}
	if u, err := a.WorkspaceUsage(ctx, "ws-a"); err != nil || u.Quota != (client.Quota{}) || u.Sandboxes != 1 {
		t.Errorf("ws-a's usage after: %+v, %v", u, err)
	}
	// ws-b's own, made above, are its own.
	if list, err := b.ListSandboxes(ctx); err != nil || len(list) != 1 || list[0].ID == sb.ID || list[0].Workspace != "ws-b" {
		t.Errorf("ws-b's sandboxes: %+v, %v", list, err)
	}
	// The daemon's own key sees both workspaces', and filters.
	if all, err := s.client.ListSandboxes(ctx); err != nil || len(all) != 2 {
		t.Errorf("the administrator's list: %+v, %v", all, err)
	}
	if status, body := s.admin().raw(t, "GET", "/v1/sandboxes?workspace=ws-a", ""); status != 200 || !strings.Contains(body, sb.ID) || strings.Count(body, `"id"`) != 1 {
		t.Errorf("the administrator's list of ws-a: %d %s", status, body)
	}
	all, _ := s.client.ListSandboxes(ctx)
	for _, sb := range all {
		if err := s.client.DeleteSandbox(ctx, sb.ID); err != nil {
			t.Error(err)
		}
	}
}

// keyed is a key's client, with plain HTTP beside.
type keyed struct {
	*client.Client
	url, key string
}

// keyIn makes a key named name in workspace ws and returns its client.
func (s *testServer) keyIn(t *testing.T, name, ws string) keyed {
	t.Helper()
	k, err := s.client.CreateAPIKeyWith(t.Context(), client.CreateAPIKeyRequest{Name: name, Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(s.url, k.Key)
	if err != nil {
		t.Fatal(err)
	}
	return keyed{Client: c, url: s.url, key: k.Key}
}

// admin is the daemon's own key's.
func (s *testServer) admin() keyed { return keyed{Client: s.client, url: s.url, key: testKey} }

// raw calls method path with body and returns the status and body.
func (k keyed) raw(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, k.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+k.key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// mcp opens an MCP session with the key.
func (k keyed) mcp(t *testing.T) *mcp.ClientSession {
	t.Helper()
	hc := &http.Client{Transport: bearer{key: k.key}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(t.Context(),
		&mcp.StreamableClientTransport{Endpoint: k.url + mcpPath, HTTPClient: hc, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// bearer adds an API key to requests.
type bearer struct{ key string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

// toolText is a tool result's text.
func toolText(res *mcp.CallToolResult) string {
	if res == nil {
		return ""
	}
	var out strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			out.WriteString(tc.Text)
		}
	}
	return out.String()
}
