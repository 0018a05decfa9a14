package e2e

import (
	"context"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/net/nettest"
)

// Sandboxes reach the test internet (nettest) under their policy, the
// same under each runtime: none reaches nothing; an allow-list reaches
// what it names, by the names the daemon resolves, over HTTP and HTTPS,
// and nothing else; full reaches every public host; and under every mode
// the host, private and link-local addresses are refused, also through an
// allowed name whose DNS answer is private. Each refusal is an event with
// its reason, and a changed policy applies to the next connection.
func TestNetworkPolicy(t *testing.T) {
	t.Parallel()
	in := nettest.Start(t)
	d := startDaemonWith(t, "--network-netns", in.Netns, "--network-dns", in.DNS)
	_, apiPort, _ := net.SplitHostPort(d.addr)
	forEachRuntime(t, func(t *testing.T, runtime string) {
		files := map[string]string{"ca.pem": string(in.CA)}
		newBox := func(p client.NetworkPolicy) string {
			return d.create(client.CreateSandboxRequest{Runtime: runtime, Files: files, Network: &p}).ID
		}
		// fetch prints what curl got, or its error.
		fetch := func(id, args string) string {
			res := d.exec(id, "curl -sS --max-time 10 --cacert ca.pem "+args+" 2>&1")
			return res.Stdout
		}
		reaches := func(id, args, host string) {
			t.Helper()
			if got := fetch(id, args); got != "hello from "+host+"\n" {
				t.Errorf("curl %s: %q, want hello from %s", args, got, host)
			}
		}
		refused := func(id, args, why string) {
			t.Helper()
			if got := fetch(id, args); strings.Contains(got, "hello from") || !strings.Contains(got, why) {
				t.Errorf("curl %s: %q, want refused (%s)", args, got, why)
			}
		}
		// Asked for by address, an HTTP request hears why.
		const blocked = "blocked_by_policy"
		// A name refused at DNS is not found.
		const unknown = "Could not resolve host"
		const sandboxAddr = "10.0.2.100" // every sandbox's own

		none := newBox(client.NetworkPolicy{Mode: client.NetworkNone})
		refused(none, "http://allowed.test/", unknown)
		refused(none, "http://203.0.113.10/", blocked)

		allow := newBox(client.NetworkPolicy{Mode: client.NetworkAllowlist, Allow: []string{"allowed.test", "private.test"}})
		reaches(allow, "http://allowed.test/", "allowed.test")
		reaches(allow, "https://allowed.test/", "allowed.test")
		refused(allow, "http://other.test/", unknown)
		refused(allow, "http://203.0.113.10/", blocked)       // the allowed host, by address
		refused(allow, "http://198.51.100.30:7000/", blocked) // an address no rule names
		refused(allow, "http://private.test/", unknown)       // allowed, but its address is private
		refused(allow, "--resolve private.test:80:10.77.0.5 http://private.test/", blocked)
		// The sandbox names the host; the daemon chooses the address.
		reaches(allow, "--resolve allowed.test:80:203.0.113.20 http://allowed.test/", "allowed.test")

		full := newBox(client.NetworkPolicy{Mode: client.NetworkFull})
		reaches(full, "http://other.test/", "other.test")
		reaches(full, "https://cdn.test/", "cdn.test")
		reaches(full, "http://203.0.113.20/", "other.test")
		if got := d.exec(full, "bash -c 'exec 3<>/dev/tcp/203.0.113.20/7000 && head -1 <&3'").Stdout; got != "echo\n" {
			t.Errorf("plain TCP to a public address under full: %q", got)
		}
		for _, dest := range []string{"http://10.0.2.2:" + apiPort + "/v1/health", "http://10.77.0.5/", "http://169.254.169.254/latest/meta-data/"} {
			refused(full, dest, blocked)
			refused(allow, dest, blocked)
		}
		refused(full, "http://private.test/", unknown)
		// Another sandbox, serving on its port 8000, is out of reach: at
		// its address the sandbox finds itself, through the gateway the
		// daemon refuses.
		if _, err := d.client.StartProcess(t.Context(), allow, client.StartProcessRequest{Name: "web", Command: "python3 -m http.server 8000", Port: 8000}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "the other sandbox's server", func() bool {
			return d.exec(allow, "curl -sS -o /dev/null -w %{http_code} http://127.0.0.1:8000/").Stdout == "200"
		})
		for _, dest := range []string{"http://" + sandboxAddr + ":8000/", "http://10.0.2.2:8000/"} {
			if got := fetch(full, dest); strings.Contains(got, "Directory listing") {
				t.Errorf("curl %s reached another sandbox's server: %q", dest, got)
			}
		}
		refused(full, "http://10.0.2.2:8000/", blocked)
		// UDP other than DNS, refused by the router itself, is told too.
		d.exec(full, `python3 -c "import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'quic', ('203.0.113.10', 443))"`)
		waitFor(t, 5*time.Second, "the refused datagram's event", func() bool {
			evs, err := d.client.NetworkEvents(t.Context(), full, 0)
			return err == nil && slices.ContainsFunc(evs.Events, func(ev client.NetworkEvent) bool {
				return ev.Kind == "udp" && ev.Dest == "203.0.113.10:443"
			})
		})

		evs, err := d.client.NetworkEvents(t.Context(), full, 0)
		if err != nil {
			t.Fatal(err)
		}
		var seen []string
		for _, ev := range evs.Events {
			seen = append(seen, ev.Kind+" "+ev.Dest+": "+ev.Reason)
		}
		all := strings.Join(seen, "\n")
		for _, want := range []string{"169.254.169.254", "10.77.0.5", "private.test"} {
			if !strings.Contains(all, want) {
				t.Errorf("no refusal event for %s in:\n%s", want, all)
			}
		}
		if len(evs.Events) == 0 || evs.Cursor != evs.Events[len(evs.Events)-1].ID {
			t.Errorf("events %+v", evs)
		}

		// A changed policy applies to the next connection.
		if _, err := d.client.SetNetwork(t.Context(), allow, client.NetworkPolicy{Mode: client.NetworkAllowlist, Allow: []string{"allowed.test", "other.test"}}); err != nil {
			t.Fatal(err)
		}
		reaches(allow, "http://other.test/", "other.test")
		if _, err := d.client.SetNetwork(t.Context(), allow, client.NetworkPolicy{Mode: client.NetworkNone}); err != nil {
			t.Fatal(err)
		}
		refused(allow, "http://other.test/", unknown)
	})

	// The tool a model calls says what was refused, and why.
	sb := d.create(client.CreateSandboxRequest{Network: &client.NetworkPolicy{Mode: client.NetworkAllowlist, Allow: []string{"allowed.test"}}})
	var run struct {
		ExitCode int    `json:"exit_code"`
		Stderr   string `json:"stderr"`
	}
	d.toolCall(t, sb.ID, "sandbox_run_command", map[string]string{"command": "curl -sS --max-time 10 http://203.0.113.20/"}, &run)
	if !strings.Contains(run.Stderr, "blocked_by_policy: 203.0.113.20:80 is not in the allow-list") {
		t.Errorf("sandbox_run_command's stderr: %q, want the blocked_by_policy line", run.Stderr)
	}

	// Refusals follow as server-sent events as they happen.
	last, err := d.client.NetworkEvents(t.Context(), sb.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	got := make(chan client.NetworkEvent, 1)
	go func() {
		_ = d.client.FollowNetworkEvents(ctx, sb.ID, last.Cursor, func(ev client.NetworkEvent) error {
			got <- ev
			cancel()
			return nil
		})
	}()
	d.exec(sb.ID, "curl -sS --max-time 10 http://cdn.test/ || true")
	// The callback sends, then cancels: wait for the end, then look.
	<-ctx.Done()
	select {
	case ev := <-got:
		if ev.Kind != "dns" || ev.Dest != "cdn.test" || ev.ID != last.Cursor+1 {
			t.Errorf("followed event %+v, want the lookup of cdn.test numbered %d", ev, last.Cursor+1)
		}
	default:
		t.Error("no refusal followed within 30 s")
	}

	// The CLI: the policy set, and the refusals listed.
	if out, stderr, code := d.cli("", "network", "set", sb.ID, "--mode", "allowlist", "--allow", "allowed.test", "--allow", "cdn.test"); code != 0 || !strings.Contains(out, "allowlist, allow [allowed.test cdn.test]") {
		t.Errorf("hutch network set: %d %q %q", code, out, stderr)
	}
	if res := d.exec(sb.ID, "curl -sS --max-time 10 http://cdn.test/"); res.Stdout != "hello from cdn.test\n" {
		t.Errorf("after hutch network set: %+v", res)
	}
	if out, stderr, code := d.cli("", "network", "events", sb.ID); code != 0 || !strings.Contains(out, "cdn.test: ") || !strings.Contains(out, "203.0.113.20:80 is not in the allow-list") {
		t.Errorf("hutch network events: %d %q %q", code, out, stderr)
	}

	// A key limited to a mode: its sandboxes get that mode when they name
	// none, and may not ask for more, at create or later.
	key, err := d.client.CreateAPIKeyWith(t.Context(), client.CreateAPIKeyRequest{Name: "agents", NetworkMode: client.NetworkAllowlist})
	if err != nil {
		t.Fatal(err)
	}
	limited, err := client.New("http://"+d.addr, key.Key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := limited.CreateSandbox(t.Context(), client.CreateSandboxRequest{Network: &client.NetworkPolicy{Mode: client.NetworkFull}}); !client.IsPermissionDenied(err) {
		t.Errorf("a key limited to allowlist asking for full: %v, want permission denied", err)
	}
	mine, err := limited.CreateSandbox(t.Context(), client.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	d.sandboxIDs = append(d.sandboxIDs, mine.ID)
	if mine.Network.Mode != client.NetworkAllowlist {
		t.Errorf("a limited key's sandbox got mode %q, want allowlist", mine.Network.Mode)
	}
	if _, err := limited.SetNetwork(t.Context(), mine.ID, client.NetworkPolicy{Mode: client.NetworkFull}); !client.IsPermissionDenied(err) {
		t.Errorf("a key limited to allowlist changing to full: %v, want permission denied", err)
	}
	if err := limited.DeleteSandbox(t.Context(), mine.ID); err != nil {
		t.Fatal(err)
	}
}

// A daemon killed and started again serves its sandboxes' networks as
// before, by their stored policies, under each runtime.
func TestNetworkAfterRestart(t *testing.T) {
	t.Parallel()
	in := nettest.Start(t)
	d := startDaemonWith(t, "--network-netns", in.Netns, "--network-dns", in.DNS)
	policy := client.NetworkPolicy{Mode: client.NetworkAllowlist, Allow: []string{"allowed.test"}}
	var ids []string
	for _, runtime := range []string{"runc", "gvisor"} {
		if runtime == "gvisor" && runscBin == "" {
			continue
		}
		ids = append(ids, d.create(client.CreateSandboxRequest{Runtime: runtime, Network: &policy}).ID)
	}
	check := func(when string) {
		t.Helper()
		for _, id := range ids {
			if res := d.exec(id, "curl -sS --max-time 10 http://allowed.test/"); res.Stdout != "hello from allowed.test\n" {
				t.Errorf("%s, sandbox %s: allowed.test: %+v", when, id, res)
			}
			if res := d.exec(id, "curl -sS --max-time 10 http://203.0.113.20/"); !strings.Contains(res.Stdout, "blocked_by_policy") {
				t.Errorf("%s, sandbox %s: a host not allowed: %+v", when, id, res)
			}
		}
	}
	check("before the restart")
	d.kill()
	d.start()
	check("after the daemon was killed and started again")
}

// A warm pool's sandbox is handed over with its network served, by the
// policy the create asks for.
func TestNetworkOfPoolSandbox(t *testing.T) {
	t.Parallel()
	in := nettest.Start(t)
	d := startDaemonWith(t, "--pool", "host@runc=1", "--network-netns", in.Netns, "--network-dns", in.DNS)
	waitPoolReady(t, d, 1)
	pooled := runcContainers(t, d)
	sb := d.create(client.CreateSandboxRequest{Template: "host", Runtime: "runc",
		Network: &client.NetworkPolicy{Mode: client.NetworkAllowlist, Allow: []string{"allowed.test"}}})
	if len(pooled) != 1 || pooled[0] != "hutch-"+sb.ID {
		t.Fatalf("the sandbox %s is not the pool's %v", sb.ID, pooled)
	}
	if res := d.exec(sb.ID, "curl -sS --max-time 10 http://allowed.test/"); res.Stdout != "hello from allowed.test\n" {
		t.Errorf("allowed.test from a pool sandbox: %+v", res)
	}
	if res := d.exec(sb.ID, "curl -sS --max-time 10 http://other.test/ 2>&1"); !strings.Contains(res.Stdout, "Could not resolve host") {
		t.Errorf("other.test from a pool sandbox: %+v", res)
	}
}
