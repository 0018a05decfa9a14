package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/store/pgtest"
)

// The membership's timing in these tests: a node beats every half
// second, and is lost after two silent seconds.
const (
	clusterHeartbeat = 500 * time.Millisecond
	clusterTimeout   = 2 * time.Second
)

// cluster is Hutch on several "hosts" on this machine: node daemons, each
// in a network namespace of its own reached over a veth pair, and API
// replicas on the loopback, sharing one PostgreSQL.
type cluster struct {
	t        *testing.T
	nodes    []*daemon
	replicas []*daemon
	byName   map[string]*daemon // nodes by their --node-name
}

// startCluster starts nodes node daemons and replicas API replicas.
func startCluster(t *testing.T, nodes, replicas int) *cluster {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
	for _, tool := range []string{"ip", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the cluster test needs %s (iproute2, util-linux): %v", tool, err)
		}
	}
	url := pgtest.Start(t) // its cleanup, last, comes after the daemons'
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "api.key")
	raw := make([]byte, 24)
	_, _ = rand.Read(raw)
	if err := os.WriteFile(keyFile, []byte("hutch_"+hex.EncodeToString(raw)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Secrets sealed by one node are opened by another: one master key.
	masterKey := filepath.Join(dir, "secrets.key")
	raw32 := make([]byte, 32)
	_, _ = rand.Read(raw32)
	if err := os.WriteFile(masterKey, []byte(base64.StdEncoding.EncodeToString(raw32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, byName: map[string]*daemon{}}
	timing := []string{"--heartbeat", clusterHeartbeat.String(), "--node-timeout", clusterTimeout.String()}
	// The replicas' addresses come first: the nodes make their URLs
	// (previews', links') with the first one's.
	replicaAddrs := make([]string, replicas)
	for i := range replicaAddrs {
		replicaAddrs[i] = freeAddr(t)
	}
	suffix := hex.EncodeToString(raw[:3])
	for i := range nodes {
		name := fmt.Sprintf("node-%d", i+1)
		ip := hostNetns(t, fmt.Sprintf("hct%s%d", suffix, i), i)
		d := newDaemon(t, append([]string{"--role", "node", "--store", url, "--node-name", name,
			"--public-url", "http://" + replicaAddrs[0], "--pool", "base=0", "--secrets-key-file", masterKey}, timing...)...)
		d.netns, d.keyFile = "/run/netns/"+fmt.Sprintf("hct%s%d", suffix, i), keyFile
		d.addr = net.JoinHostPort(ip, "7070")
		d.start()
		c.nodes = append(c.nodes, d)
		c.byName[name] = d
	}
	for i := range replicas {
		d := newDaemon(t, append([]string{"--role", "api", "--store", url}, timing...)...)
		d.keyFile, d.addr = keyFile, replicaAddrs[i]
		d.start()
		c.replicas = append(c.replicas, d)
	}
	return c
}

// hostNetns makes a network namespace named name, linked to this one by a
// veth pair on 10.231.i.0/30, and returns the namespace's address. The
// test's cleanup removes both (after the daemon's, registered later).
func hostNetns(t *testing.T, name string, i int) string {
	t.Helper()
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	outer, inner := name+"a", name+"b"
	hostIP, nodeIP := fmt.Sprintf("10.231.%d.1", i), fmt.Sprintf("10.231.%d.2", i)
	ip("netns", "add", name)
	t.Cleanup(func() {
		// Deleting the namespace deletes its end of the pair, and so
		// the pair.
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v\n%s", name, err, out)
		}
	})
	ip("link", "add", outer, "type", "veth", "peer", "name", inner)
	ip("link", "set", inner, "netns", name)
	ip("addr", "add", hostIP+"/30", "dev", outer)
	ip("link", "set", outer, "up")
	ip("-n", name, "addr", "add", nodeIP+"/30", "dev", inner)
	ip("-n", name, "link", "set", inner, "up")
	ip("-n", name, "link", "set", "lo", "up")
	ip("-n", name, "route", "add", "default", "via", hostIP)
	return nodeIP
}

// create makes a sandbox through replica r, and gives it to the node
// holding it for the leak check.
func (c *cluster) create(r *daemon, req client.CreateSandboxRequest) *client.Sandbox {
	c.t.Helper()
	sb, err := r.client.CreateSandbox(c.t.Context(), req)
	if err != nil {
		c.t.Fatalf("create through %s: %v", r.addr, err)
	}
	c.holder(sb).sandboxIDs = append(c.holder(sb).sandboxIDs, sb.ID)
	return sb
}

func (c *cluster) holder(sb *client.Sandbox) *daemon {
	c.t.Helper()
	d := c.byName[sb.Node]
	if d == nil {
		c.t.Fatalf("sandbox %s is on node %q, not one of the test's", sb.ID, sb.Node)
	}
	return d
}

// Three nodes and two API replicas: creates through either replica spread
// over the nodes; exec, files, processes, services with their previews and
// tools work through either; a keyed create raced on both gives one
// sandbox; a node killed is marked lost within its timeout, and its
// sandboxes say so.
func TestCluster(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, 2)
	ctx := t.Context()
	a, b := c.replicas[0], c.replicas[1]

	// Spread: six creates, alternating replicas, land on every node.
	var sandboxes []*client.Sandbox
	used := map[string]int{}
	for i := range 6 {
		sb := c.create(c.replicas[i%2], client.CreateSandboxRequest{})
		sandboxes = append(sandboxes, sb)
		used[sb.Node]++
	}
	if len(used) != 3 {
		t.Errorf("six sandboxes went to %v, not to all three nodes", used)
	}

	// Every call through either replica reaches the sandbox's node.
	for i, sb := range sandboxes[:3] {
		this, other := c.replicas[i%2], c.replicas[(i+1)%2]
		res, err := this.client.Exec(ctx, sb.ID, client.ExecRequest{Command: "echo hi from $(hostname)"})
		if err != nil || res.ExitCode != 0 || !strings.HasPrefix(res.Stdout, "hi from") {
			t.Errorf("exec on %s through %s: %+v, %v", sb.ID, this.addr, res, err)
		}
		if _, err := other.client.WriteFile(ctx, sb.ID, "note.txt", strings.NewReader("written through the other replica")); err != nil {
			t.Fatalf("write through %s: %v", other.addr, err)
		}
		if got := readAll(t, this, sb.ID, "note.txt"); got != "written through the other replica" {
			t.Errorf("read through %s: %q", this.addr, got)
		}
		if _, err := this.client.StartProcess(ctx, sb.ID, client.StartProcessRequest{Name: "ticker", Command: "while true; do date; sleep 1; done"}); err != nil {
			t.Errorf("start a process through %s: %v", this.addr, err)
		} else if procs, err := other.client.ListProcesses(ctx, sb.ID); err != nil || len(procs) != 1 || procs[0].Status != "running" {
			t.Errorf("its processes through %s: %+v, %v", other.addr, procs, err)
		}
		tool, err := other.client.RunTool(ctx, sb.ID, "sandbox_list_directory", map[string]any{})
		if err != nil || !strings.Contains(string(tool.Result), "note.txt") {
			t.Errorf("a tool call through %s: %+v, %v", other.addr, tool, err)
		}
	}

	// A preview through either replica, by path and by host.
	web := sandboxes[0]
	if _, err := a.client.StartService(ctx, web.ID, client.StartServiceRequest{Name: "web", Command: "echo hi-from-" + web.ID + " > index.html && exec python3 -m http.server 8000", Port: 8000}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, a, web.ID, "web", client.ServiceRunning)
	link, err := b.client.ServiceLink(ctx, web.ID, "web", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range c.replicas {
		for _, u := range []string{link.URL, link.PathURL} {
			if code, body := getVia(t, r.addr, u); code != http.StatusOK || body != "hi-from-"+web.ID+"\n" {
				t.Errorf("the preview %s through %s: %d %q", u, r.addr, code, body)
			}
		}
	}

	// A keyed create raced on both replicas, a few times: one sandbox
	// each time.
	for round := range 3 {
		key := fmt.Sprintf("race-%d", round)
		ids := make([]string, 2)
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for i, r := range c.replicas {
			wg.Go(func() {
				sb, err := r.client.CreateSandbox(ctx, client.CreateSandboxRequest{Key: key})
				if err == nil {
					ids[i] = sb.ID
				}
				errs[i] = err
			})
		}
		wg.Wait()
		if errs[0] != nil || errs[1] != nil || ids[0] != ids[1] {
			t.Errorf("key %s raced on both replicas: %v, %v", key, ids, errs)
		}
		if sb, err := a.client.GetSandbox(ctx, ids[0]); err == nil {
			c.holder(sb).sandboxIDs = append(c.holder(sb).sandboxIDs, sb.ID)
		}
	}

	// A node killed: lost within its timeout, its running sandboxes in
	// error saying so, and calls to them refused with that reason.
	victim := sandboxes[1]
	node := c.holder(victim)
	killed := time.Now()
	node.kill()
	var lost *client.Sandbox
	for deadline := killed.Add(clusterTimeout + 3*time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if sb, err := b.client.GetSandbox(ctx, victim.ID); err == nil && sb.State == "error" {
			lost = sb
			break
		}
	}
	switch {
	case lost == nil:
		t.Fatalf("sandbox %s of killed node %s not in error %v after the kill", victim.ID, victim.Node, clusterTimeout+3*time.Second)
	case !strings.Contains(lost.StateReason, "node "+victim.Node+" lost"):
		t.Errorf("its reason: %q", lost.StateReason)
	}
	t.Logf("node %s marked lost %v after its kill (timeout %v)", victim.Node, time.Since(killed).Round(time.Millisecond), clusterTimeout)
	if _, err := a.client.Exec(ctx, victim.ID, client.ExecRequest{Command: "true"}); !client.IsUnavailable(err) || !strings.Contains(err.Error(), "lost") {
		t.Errorf("exec on a lost node's sandbox: %v", err)
	}
	// The other nodes' sandboxes are untouched.
	for _, sb := range sandboxes {
		if sb.Node == victim.Node {
			continue
		}
		if res, err := a.client.Exec(ctx, sb.ID, client.ExecRequest{Command: "true"}); err != nil || res.ExitCode != 0 {
			t.Errorf("exec on %s of node %s after %s was lost: %+v, %v", sb.ID, sb.Node, victim.Node, res, err)
		}
	}
	// Back, the node is a member again (its sandboxes start again on a
	// call, as a single box's in error do).
	node.start()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		res, err := b.client.Exec(ctx, victim.ID, client.ExecRequest{Command: "cat note.txt 2>/dev/null || echo none"})
		if err == nil && res.ExitCode == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sandbox of the node back: %+v, %v", res, err)
		}
	}
}

// readAll reads a file of sandbox id through d.
func readAll(t *testing.T, d *daemon, id, path string) string {
	t.Helper()
	r, err := d.client.ReadFile(t.Context(), id, path)
	if err != nil {
		t.Fatalf("read %s through %s: %v", path, d.addr, err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// getVia GETs u as a browser resolving *.localhost would: every host
// dialled at addr, cookies kept (a link's token becomes one).
func getVia(t *testing.T, addr, u string) (int, string) {
	t.Helper()
	dial := func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Transport: &http.Transport{DialContext: dial}, Timeout: 30 * time.Second}
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}
