package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/net/nettest"
)

// recorder keeps every response body a client reads, to look for secrets
// in them afterwards.
type recorder struct {
	mu  sync.Mutex
	all bytes.Buffer
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	res.Body = struct {
		io.Reader
		io.Closer
	}{io.TeeReader(res.Body, writerFunc(func(p []byte) (int, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.all.Write(p)
	})), res.Body}
	return res, nil
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// keyClient makes a key in workspace ws and returns a client of it whose
// answers rec keeps, acting for user ("" for none).
func (d *daemon) keyClient(t *testing.T, name, ws, user string, rec *recorder) *client.Client {
	t.Helper()
	k, err := d.client.CreateAPIKeyWith(t.Context(), client.CreateAPIKeyRequest{Name: name, Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	opts := []client.Option{client.WithHTTPClient(&http.Client{Transport: rec})}
	if user != "" {
		opts = append(opts, client.WithUser(user))
	}
	c, err := client.New("http://"+d.addr, k.Key, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// encodings are the forms of a value that must never leave the daemon.
func encodings(v string) map[string]string {
	return map[string]string{
		"raw":       v,
		"base64":    base64.StdEncoding.EncodeToString([]byte(v)),
		"base64url": base64.RawURLEncoding.EncodeToString([]byte(v)),
		"hex":       hex.EncodeToString([]byte(v)),
		"url":       url.QueryEscape(v),
	}
}

func sha(v string) string {
	sum := sha256.Sum256([]byte(v))
	return hex.EncodeToString(sum[:])
}

// Secrets of a workspace and of its users reach each command as
// variables (a user's own over the workspace's, another user's never),
// and their values never leave the daemon: not in an answer (a value
// printed a byte at a time, or encoded, comes back [redacted:NAME]), not
// in the daemon's log, not in its database, not in the sandbox's agent's
// environment.
func TestSecrets(t *testing.T) {
	t.Parallel()
	forEachRuntimeParallel(t, func(t *testing.T, runtime string) {
		d := startDaemon(t)
		ctx := t.Context()
		rec := &recorder{}
		u1 := d.keyClient(t, "app", "acme", "u-1", rec)
		k2, err := d.client.CreateAPIKeyWith(ctx, client.CreateAPIKeyRequest{Name: "app2", Workspace: "acme"})
		if err != nil {
			t.Fatal(err)
		}
		u2, err := client.New("http://"+d.addr, k2.Key, client.WithHTTPClient(&http.Client{Transport: rec}), client.WithUser("u-2"))
		if err != nil {
			t.Fatal(err)
		}
		const (
			wsValue   = "workspace-value/with+chars=&more 0123"
			userValue = "u1-personal-value-456789"
			other     = "db-password-Zq9!x7#kk"
		)
		sets := []client.SetSecretRequest{
			{Name: "API_TOKEN", Value: wsValue, Description: "the team's"},
			{Name: "API_TOKEN", Value: userValue, Scope: client.ScopeUser}, // u-1's, by its header
			{Name: "DB_PASSWORD", Value: other},
		}
		for _, s := range sets {
			if _, err := u1.SetSecret(ctx, s); err != nil {
				t.Fatalf("set %s: %v", s.Name, err)
			}
		}
		sb, err := u1.CreateSandbox(ctx, client.CreateSandboxRequest{Runtime: runtime})
		if err != nil {
			t.Fatal(err)
		}
		d.sandboxIDs = append(d.sandboxIDs, sb.ID)
		if sb.User != "u-1" || sb.Workspace != "acme" {
			t.Errorf("the sandbox's owner: %+v", sb)
		}

		// Whose value each user's command gets, told by its hash (the
		// value itself would come back redacted).
		hashOf := func(c *client.Client) string {
			t.Helper()
			res, err := c.Exec(ctx, sb.ID, client.ExecRequest{Command: `printf %s "$API_TOKEN" | sha256sum | cut -c1-64`})
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("exec: %+v, %v", res, err)
			}
			return strings.TrimSpace(res.Stdout)
		}
		if got := hashOf(u1); got != sha(userValue) {
			t.Errorf("u-1's command got a value of hash %s, want u-1's own (%s)", got, sha(userValue))
		}
		if got := hashOf(u2); got != sha(wsValue) {
			t.Errorf("u-2's command got a value of hash %s, want the workspace's (%s)", got, sha(wsValue))
		}
		// A tool call's command, too (REST here; MCP goes the same way).
		for _, c := range []struct {
			cl   *client.Client
			want string
		}{{u1, sha(userValue)}, {u2, sha(wsValue)}} {
			res, err := c.cl.RunTool(ctx, sb.ID, "sandbox_run_command", map[string]any{"command": `printf %s "$API_TOKEN" | sha256sum`})
			if err != nil || res.Error != nil || !strings.Contains(string(res.Result), c.want) {
				t.Errorf("a tool call's command: %+v, %v; want the hash %s", res, err, c.want)
			}
		}
		if list, err := u2.ListSecrets(ctx); err != nil || len(list) != 2 || list[0].Scope != client.ScopeWorkspace || list[1].Scope != client.ScopeWorkspace {
			t.Errorf("u-2's list of secrets: %+v, %v; want the workspace's two, not u-1's", list, err)
		}
		if list, err := u1.ListSecrets(ctx); err != nil || len(list) != 3 {
			t.Errorf("u-1's list of secrets: %+v, %v; want its own and the workspace's", list, err)
		}

		// Printed, whole and encoded: redacted.
		res, err := u2.Exec(ctx, sb.ID, client.ExecRequest{Command: `printf '%s\n' "$API_TOKEN"; printf %s "$API_TOKEN" | base64 -w0; echo; ` +
			`printf %s "$API_TOKEN" | od -An -tx1 | tr -d ' \n'; echo; ` +
			`python3 -c 'import os, urllib.parse; print(urllib.parse.quote_plus(os.environ["API_TOKEN"]))'; ` +
			`echo "$DB_PASSWORD" >&2`})
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.Repeat("[redacted:API_TOKEN]\n", 4); res.Stdout != want || res.Stderr != "[redacted:DB_PASSWORD]\n" {
			t.Errorf("printed secrets: stdout %q stderr %q; want %q and the password redacted", res.Stdout, res.Stderr, want)
		}
		// A byte at a time, streamed.
		var streamed bytes.Buffer
		_, err = u2.ExecStream(ctx, sb.ID, client.ExecRequest{
			Cmd: []string{"bash", "-c", `v="$API_TOKEN"; for ((i = 0; i < ${#v}; i++)); do printf %s "${v:$i:1}"; sleep 0.01; done`},
		}, func(ev client.ExecEvent) error {
			streamed.Write(ev.Data)
			return nil
		})
		if err != nil || streamed.String() != "[redacted:API_TOKEN]" {
			t.Errorf("a secret printed a byte at a time streams %q, %v; want [redacted:API_TOKEN]", streamed.String(), err)
		}
		// Not in the agent's own environment, nor in the sandbox's files.
		res, err = u2.Exec(ctx, sb.ID, client.ExecRequest{User: "root", Command: `tr '\0' '\n' < /proc/1/environ | grep -c API_TOKEN; ` +
			`grep -rlF "$API_TOKEN" /home /tmp /etc 2>/dev/null | wc -l`})
		if err != nil || res.Stdout != "0\n0\n" {
			t.Errorf("the secret in the agent's environment or the sandbox's files: %+v, %v", res, err)
		}
		// An error message that would hold a value is redacted too.
		if _, err := u2.Exec(ctx, sb.ID, client.ExecRequest{Command: "true", Cwd: "/nonexistent/" + other}); err == nil || !strings.Contains(err.Error(), "[redacted:DB_PASSWORD]") {
			t.Errorf("an error naming a secret's value: %v; want it redacted", err)
		}
		// A path given in a query (the audit log records it) that holds a
		// value: it is kept redacted.
		if _, err := u2.StatFile(ctx, sb.ID, "/tmp/"+other); err == nil {
			t.Errorf("stat of a file that is not there: no error")
		}
		// The audit log names the user a call was for.
		if entries, err := d.client.ListAudit(ctx, client.AuditFilter{Workspace: "acme", Limit: 200}); err != nil || !auditHas(entries, "u-2", "POST /v1/sandboxes/{id}/exec") || !auditHas(entries, "u-1", "POST /v1/secrets") {
			t.Errorf("the audit log: %+v, %v", entries, err)
		}

		if err := u1.DeleteSandbox(ctx, sb.ID); err != nil {
			t.Fatal(err)
		}
		d.stop() // the database and log are whole now
		leaks := map[string][]byte{"answers": rec.all.Bytes()}
		for _, name := range []string{"daemon.log", "hutch.db", "hutch.db-wal"} {
			path := filepath.Join(d.dataDir, name)
			if name == "daemon.log" {
				path = d.logPath
			}
			if b, err := os.ReadFile(path); err == nil {
				leaks[name] = b
			}
		}
		if len(leaks) < 3 || !bytes.Contains(leaks["answers"], []byte("[redacted:API_TOKEN]")) {
			t.Fatalf("nothing to look in: %d places", len(leaks))
		}
		for where, b := range leaks {
			for _, v := range []string{wsValue, userValue, other} {
				for form, e := range encodings(v) {
					if bytes.Contains(b, []byte(e)) {
						t.Errorf("%s holds the %s form of a secret's value", where, form)
					}
				}
			}
		}
		d.start() // for the cleanup's checks
	})
}

func auditHas(entries []client.AuditEntry, user, action string) bool {
	for _, e := range entries {
		if e.User == user && e.Action == action && e.Workspace == "acme" {
			return true
		}
	}
	return false
}

// Master key: a rotation keeps every secret; a daemon started with a
// wrong master key refuses to start and says so, and the right one opens
// them all again.
func TestMasterKey(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	ctx := t.Context()
	values := map[string]string{"ONE": "first-value-1111", "TWO": "second-value-2222", "THREE": "third-value-3333"}
	for name, v := range values {
		if _, err := d.client.SetSecret(ctx, client.SetSecretRequest{Name: name, Value: v}); err != nil {
			t.Fatal(err)
		}
	}
	// The CLI takes a value from standard input, and lists no value.
	values["FOUR"] = "fourth-value-4444"
	if _, stderr, code := d.cli(values["FOUR"]+"\n", "secret", "set", "FOUR", "--description", "by the CLI"); code != 0 {
		t.Fatalf("hutch secret set: %d %s", code, stderr)
	}
	if out, _, code := d.cli("", "secret", "ls"); code != 0 || !strings.Contains(out, "FOUR") || !strings.Contains(out, "by the CLI") || strings.Contains(out, "value-") {
		t.Errorf("hutch secret ls: %d %s", code, out)
	}
	keyFile := filepath.Join(d.dataDir, "secrets.key")
	before, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := d.cli("", "secret", "rotate-master"); code != 0 {
		t.Fatalf("hutch secret rotate-master: %d %s", code, stderr)
	}
	after, err := os.ReadFile(keyFile)
	if err != nil || bytes.Equal(before, after) {
		t.Fatalf("the key file after rotation: unchanged or %v", err)
	}
	check := func() {
		t.Helper()
		sb := d.create(client.CreateSandboxRequest{})
		for name, v := range values {
			res := d.exec(sb.ID, fmt.Sprintf(`printf %%s "$%s" | sha256sum | cut -c1-64`, name))
			if strings.TrimSpace(res.Stdout) != sha(v) {
				t.Errorf("%s after rotation and restart: hash %q", name, res.Stdout)
			}
		}
		if err := d.client.DeleteSandbox(ctx, sb.ID); err != nil {
			t.Fatal(err)
		}
	}
	d.stop()
	d.start()
	check()

	// A wrong key, from the environment: refused at start.
	d.stop()
	wrong := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	cmd := d.serveCommand()
	cmd.Env = append(os.Environ(), "HUTCH_MASTER_KEY="+wrong)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "master key") || strings.Contains(string(out), wrong) {
		t.Errorf("a daemon with a wrong master key: %v\n%s", err, out)
	}
	// The old key file: refused too.
	if err := os.WriteFile(keyFile, before, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = d.serveCommand().CombinedOutput()
	if err == nil || !strings.Contains(string(out), "master key") {
		t.Errorf("a daemon with the key from before the rotation: %v\n%s", err, out)
	}
	if err := os.WriteFile(keyFile, after, 0o600); err != nil {
		t.Fatal(err)
	}
	d.start()
	check()
}

// memScan is a Python script that reads its own process's memory and
// prints how often bytes A are followed by bytes B (two halves given in
// hex, never joined in the script, so that the needle itself is not in
// its memory), for each of the pairs it is given: how a test tells that a
// value is in no process of a sandbox without handing the value to it.
const memScan = `
import os, re, ssl, sys, urllib.request
ph = os.environ["API_KEY"]
ctx = ssl.create_default_context(cafile="both.pem")
req = urllib.request.Request("https://allowed.test/", headers={"Authorization": "Bearer " + ph})
print(urllib.request.urlopen(req, context=ctx).read().decode().strip())
pairs = [(bytes.fromhex(a), bytes.fromhex(b)) for a, b in (p.split(":") for p in sys.argv[1:])]
counts = [0] * len(pairs)
with open("/proc/self/maps") as maps, open("/proc/self/mem", "rb", 0) as mem:
    for line in maps:
        m = re.match(r"([0-9a-f]+)-([0-9a-f]+) r", line)
        if not m:
            continue
        start, end = int(m.group(1), 16), int(m.group(2), 16)
        try:
            mem.seek(start)
            chunk = mem.read(end - start)
        except (OSError, ValueError, OverflowError):
            continue
        for k, (a, b) in enumerate(pairs):
            i = chunk.find(a)
            while i >= 0:
                if chunk[i + len(a):i + len(a) + len(b)] == b:
                    counts[k] += 1
                i = chunk.find(a, i + 1)
print(" ".join(str(c) for c in counts))
`

// halves is v's two halves in hex, as memScan takes them.
func halves(v string) string {
	return hex.EncodeToString([]byte(v[:len(v)/2])) + ":" + hex.EncodeToString([]byte(v[len(v)/2:]))
}

// A secret injected by proxy never enters the sandbox: its variable holds
// a placeholder, which the daemon swaps for the value in requests to the
// secret's hosts only (headers, and the query string when asked), over
// TLS it terminates with its own CA. The real host receives the value;
// another host receives the placeholder; the sandbox's processes' memory
// and files hold the placeholder alone.
func TestSecretProxy(t *testing.T) {
	t.Parallel()
	in := nettest.Start(t)
	roots := filepath.Join(t.TempDir(), "roots.pem")
	if err := os.WriteFile(roots, in.CA, 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemonWith(t, "--network-netns", in.Netns, "--network-dns", in.DNS, "--egress-roots", roots)
	ctx := t.Context()
	const (
		value  = "sk-live-proxy-value-0123456789"
		qvalue = "query-token-value-987654"
	)
	for _, s := range []client.SetSecretRequest{
		{Name: "API_KEY", Value: value, Inject: client.InjectProxy, Hosts: []string{"allowed.test"}},
		{Name: "Q_KEY", Value: qvalue, Inject: client.InjectProxy, Hosts: []string{"allowed.test"}, Query: true},
	} {
		if _, err := d.client.SetSecret(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	list, err := d.client.ListSecrets(ctx)
	if err != nil || len(list) != 2 || !strings.HasPrefix(list[0].Placeholder, "hutch-secret-API_KEY-") {
		t.Fatalf("the proxy secrets: %+v, %v", list, err)
	}
	placeholder := list[0].Placeholder
	forEachRuntime(t, func(t *testing.T, runtime string) {
		sb := d.create(client.CreateSandboxRequest{Runtime: runtime, Files: map[string]string{"test-ca.pem": string(in.CA)},
			Network: &client.NetworkPolicy{Mode: client.NetworkAllowlist, Allow: []string{"allowed.test", "other.test"}}})
		// The sandbox trusts the daemon's CA (for allowed.test, which
		// the daemon serves) and the test internet's (for other.test).
		if res := d.exec(sb.ID, `cat /etc/hutch/ca-bundle.crt test-ca.pem > both.pem && printf %s "$API_KEY"`); res.ExitCode != 0 || res.Stdout != placeholder {
			t.Fatalf("the variable in the sandbox: %+v; want the placeholder %s", res, placeholder)
		}
		before := len(in.Requests())
		for _, host := range []string{"allowed.test", "other.test"} {
			res := d.exec(sb.ID, `curl -sS --cacert both.pem -H "Authorization: Bearer $API_KEY" "https://`+host+`/?k=$Q_KEY" 2>&1`)
			if res.Stdout != "hello from "+host+"\n" {
				t.Fatalf("curl https://%s: %q", host, res.Stdout)
			}
		}
		seen := in.Requests()[before:]
		if len(seen) != 2 {
			t.Fatalf("the test internet saw %d requests, want 2: %+v", len(seen), seen)
		}
		for _, r := range seen {
			auth, q := r.Header.Get("Authorization"), r.URL
			switch r.Host {
			case "allowed.test":
				if auth != "Bearer "+value || q != "/?k="+qvalue || !r.TLS {
					t.Errorf("allowed.test received Authorization %q and target %q; want the values", auth, q)
				}
			case "other.test":
				if auth != "Bearer "+placeholder || strings.Contains(q, qvalue) {
					t.Errorf("other.test received Authorization %q and target %q; want the placeholders", auth, q)
				}
			}
		}
		// A process that used the secret holds only its placeholder.
		res, err := d.client.Exec(ctx, sb.ID, client.ExecRequest{Cmd: []string{"python3", "-c", memScan, halves(value), halves(placeholder)}})
		if err != nil || res.Stdout == "" {
			t.Fatalf("memory scan: %+v, %v", res, err)
		}
		if lines := strings.Split(strings.TrimSpace(res.Stdout), "\n"); len(lines) != 2 || lines[0] != "hello from allowed.test" ||
			!strings.HasPrefix(lines[1], "0 ") || strings.HasSuffix(lines[1], " 0") {
			t.Errorf("memory scan: %q; want the request answered, the value found 0 times and the placeholder found", res.Stdout)
		}
		// Nor do its files.
		if res := d.exec(sb.ID, `grep -rlF "`+value[:14]+`" /home /tmp /etc 2>/dev/null | wc -l`); res.Stdout != "0\n" {
			t.Errorf("files holding the value: %q", res.Stdout)
		}
		if err := d.client.DeleteSandbox(ctx, sb.ID); err != nil {
			t.Fatal(err)
		}
	})
}
