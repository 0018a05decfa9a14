package cli

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
)

func TestCreate(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string
		wantErr  string
		wantReq  *client.CreateSandboxRequest
	}{
		{
			name:    "defaults",
			args:    []string{"create"},
			wantOut: "sb-1\n",
			wantReq: &client.CreateSandboxRequest{},
		},
		{
			name: "flags",
			args: []string{"create", "--template", "py", "--cpus", "1.5", "--memory", "1024", "--pids", "64",
				"-e", "A=1", "-e", "B=x=y", "-e", "HOSTVAR", "--meta", "owner=me", "--idle-timeout", "90s"},
			wantOut: "sb-1\n",
			wantReq: &client.CreateSandboxRequest{
				Template: "py", CPUs: 1.5, MemoryMB: 1024, Pids: 64,
				Env:          map[string]string{"A": "1", "B": "x=y", "HOSTVAR": "from-host"},
				Metadata:     map[string]string{"owner": "me"},
				IdleTimeoutS: 90,
			},
		},
		{name: "unset host variable", args: []string{"create", "-e", "NOPE"}, wantCode: 2, wantErr: "NOPE is not set here"},
		{name: "bad meta", args: []string{"create", "--meta", "novalue"}, wantCode: 2, wantErr: "want k=v"},
		{name: "bad flag", args: []string{"create", "--cpus", "many"}, wantCode: 2, wantErr: "invalid argument"},
		{name: "extra argument", args: []string{"create", "x"}, wantCode: 2, wantErr: "takes no arguments"},
		{name: "negative idle timeout", args: []string{"create", "--idle-timeout", "-1s"}, wantCode: 2, wantErr: "must not be negative"},
		{
			name:    "network",
			args:    []string{"create", "--network", "allowlist", "--allow", "pypi.org", "--allow", "203.0.113.0/24", "--deny", "evil.pypi.org"},
			wantOut: "sb-1\n",
			wantReq: &client.CreateSandboxRequest{Network: &client.NetworkPolicy{Mode: "allowlist", Allow: []string{"pypi.org", "203.0.113.0/24"}, Deny: []string{"evil.pypi.org"}}},
		},
		{name: "allow without a mode", args: []string{"create", "--allow", "pypi.org"}, wantCode: 2, wantErr: "need --network"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeDaemon(t)
			r := f.run(t.Context(), "", tt.args...)
			created, _, _ := f.calls()
			if r.code != tt.wantCode {
				t.Fatalf("exit %d, want %d; stderr %q", r.code, tt.wantCode, r.stderr)
			}
			if tt.wantOut != "" && r.stdout != tt.wantOut {
				t.Errorf("stdout %q, want %q", r.stdout, tt.wantOut)
			}
			if !strings.Contains(r.stderr, tt.wantErr) {
				t.Errorf("stderr %q, want %q", r.stderr, tt.wantErr)
			}
			if tt.wantReq != nil {
				if len(created) != 1 || !reflect.DeepEqual(created[0], *tt.wantReq) {
					t.Errorf("created %+v, want %+v", created, *tt.wantReq)
				}
			} else if len(created) != 0 {
				t.Errorf("created %+v", created)
			}
		})
	}
}

func TestCreateJSON(t *testing.T) {
	f := newFakeDaemon(t)
	r := f.run(t.Context(), "", "create", "-o", "json", "--template", "py")
	var sb client.Sandbox
	if err := json.Unmarshal([]byte(r.stdout), &sb); err != nil || r.code != 0 {
		t.Fatalf("exit %d, stdout %q: %v", r.code, r.stdout, err)
	}
	if sb.ID != "sb-1" || sb.Template != "py" || sb.State != "running" {
		t.Errorf("sandbox %+v", sb)
	}
}

func TestLs(t *testing.T) {
	f := newFakeDaemon(t)
	f.addSandbox("old", fakeNow.Add(-50*time.Hour))
	f.addSandbox("new", fakeNow.Add(-90*time.Second))

	r := f.run(t.Context(), "", "ls")
	want := "" +
		"ID    TEMPLATE   RUNTIME   STATE     AGE\n" +
		"old   host       runc      running   2d\n" +
		"new   host       runc      running   1m\n"
	if r.code != 0 || r.stdout != want {
		t.Errorf("exit %d, stdout\n%s\nwant\n%s", r.code, r.stdout, want)
	}

	r = f.run(t.Context(), "", "ls", "--output", "json")
	var sbs []client.Sandbox
	if err := json.Unmarshal([]byte(r.stdout), &sbs); err != nil {
		t.Fatalf("stdout %q: %v", r.stdout, err)
	}
	if len(sbs) != 2 || sbs[0].ID != "old" || sbs[1].ID != "new" {
		t.Errorf("sandboxes %+v", sbs)
	}

	empty := newFakeDaemon(t)
	if r := empty.run(t.Context(), "", "ls", "-o", "json"); strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("empty list printed %q", r.stdout)
	}
}

func TestInspect(t *testing.T) {
	f := newFakeDaemon(t)
	f.addSandbox("abc", fakeNow)
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  []string
		wantErr  string
	}{
		{"table", []string{"inspect", "abc"}, 0, []string{"ID:", "abc", "State:", "running", "Memory:", "512 MiB", "Idle timeout:", "5m0s",
			"Activity:", "idle, last", "no command, background process or CPU use", "Idle action at:"}, ""},
		{"json", []string{"inspect", "abc", "-o", "json"}, 0, []string{`"id": "abc"`, `"idle_timeout_s": 300`, `"activity": {`, `"busy": false`}, ""},
		{"not found", []string{"inspect", "nope"}, 1, nil, "hutch: sandbox nope not found\n"},
		{"no id", []string{"inspect"}, 2, nil, "takes a sandbox ID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.run(t.Context(), "", tt.args...)
			if r.code != tt.wantCode {
				t.Fatalf("exit %d, want %d; stderr %q", r.code, tt.wantCode, r.stderr)
			}
			for _, w := range tt.wantOut {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("stdout %q lacks %q", r.stdout, w)
				}
			}
			if !strings.Contains(r.stderr, tt.wantErr) {
				t.Errorf("stderr %q, want %q", r.stderr, tt.wantErr)
			}
		})
	}
}

func TestRm(t *testing.T) {
	f := newFakeDaemon(t)
	f.addSandbox("a", fakeNow)
	f.addSandbox("b", fakeNow)
	r := f.run(t.Context(), "", "rm", "a", "nope", "b")
	if r.code != 1 {
		t.Errorf("exit %d, want 1", r.code)
	}
	if r.stdout != "a\nb\n" {
		t.Errorf("stdout %q", r.stdout)
	}
	if r.stderr != "hutch: sandbox nope not found\n" {
		t.Errorf("stderr %q", r.stderr)
	}
	if ids := f.sandboxIDs(); len(ids) != 0 {
		t.Errorf("left %v", ids)
	}
	if r := f.run(t.Context(), "", "rm"); r.code != 2 {
		t.Errorf("rm without IDs: exit %d", r.code)
	}
}

// TestParseActions reads hutch desktop act's words.
func TestParseActions(t *testing.T) {
	t.Parallel()
	got, err := parseActions([]string{"click", "300", "220", "type", "hello world", "key", "ctrl+a", "right_click", "1", "2", "drag", "1", "2", "3", "4", "wait", "100", "scroll", "down", `{"type":"move","x":5,"y":6}`})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(got)
	want := `[{"type":"click","x":300,"y":220},{"type":"type","text":"hello world"},{"type":"key","keys":"ctrl+a"},{"type":"click","x":1,"y":2,"button":"right"},{"type":"drag","path":[{"x":1,"y":2},{"x":3,"y":4}]},{"type":"wait","ms":100},{"type":"scroll","direction":"down"},{"type":"move","x":5,"y":6}]`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
	for _, bad := range [][]string{{"click", "1"}, {"click", "a", "b"}, {"fly"}, {"type"}, {"{nope"}} {
		if _, err := parseActions(bad); err == nil {
			t.Errorf("%q was taken", bad)
		}
	}
}
