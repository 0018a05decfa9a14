package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
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
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hutchdev/hutch/client"
	hcluster "github.com/hutchdev/hutch/internal/cluster"
	"github.com/hutchdev/hutch/internal/storage/store/pgtest"
	"github.com/hutchdev/hutch/internal/storage/store/postgres"
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
	// What every node is started with.
	url, keyFile, masterKey, publicURL, suffix string
	nodeFlags, nodeEnv                         []string
	subnet                                     string // 10.231.N
}

// startCluster starts nodes node daemons and replicas API replicas;
// nodeFlags go to every node.
func startCluster(t *testing.T, nodes, replicas int, nodeFlags ...string) *cluster {
	return startClusterWith(t, nodes, replicas, func(*cluster) ([]string, []string) { return nodeFlags, nil })
}

// startClusterWith is startCluster with the nodes' flags and environment
// chosen once the cluster's network is there.
func startClusterWith(t *testing.T, nodes, replicas int, nodeOptions func(c *cluster) (flags, env []string)) *cluster {
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
	// The replicas' addresses come first: the nodes make their URLs
	// (previews', links') with the first one's.
	replicaAddrs := make([]string, replicas)
	for i := range replicaAddrs {
		replicaAddrs[i] = freeAddr(t)
	}
	c := &cluster{
		t: t, byName: map[string]*daemon{}, url: url, keyFile: keyFile, masterKey: masterKey,
		publicURL: "http://" + replicaAddrs[0], suffix: hex.EncodeToString(raw[:3]),
		subnet: fmt.Sprintf("10.231.%d", clusters.Add(1)%250),
	}
	c.bridge()
	c.nodeFlags, c.nodeEnv = nodeOptions(c)
	for i := range nodes {
		c.addNode(fmt.Sprintf("node-%d", i+1))
	}
	for i := range replicas {
		d := newDaemon(t, append([]string{"--role", "api", "--store", url}, clusterTiming...)...)
		d.keyFile, d.addr = keyFile, replicaAddrs[i]
		d.start()
		c.replicas = append(c.replicas, d)
	}
	return c
}

var clusterTiming = []string{"--heartbeat", clusterHeartbeat.String(), "--node-timeout", clusterTimeout.String()}

// addNode starts a node daemon named name on a "host" of its own.
func (c *cluster) addNode(name string) *daemon {
	t := c.t
	t.Helper()
	netns, addr := c.hostNetns(len(c.nodes))
	d := newDaemon(t, append([]string{"--role", "node", "--store", c.url, "--node-name", name,
		"--public-url", c.publicURL, "--pool", "base=0", "--secrets-key-file", c.masterKey}, append(clusterTiming, c.nodeFlags...)...)...)
	d.netns, d.keyFile, d.nodeName, d.env = netns, c.keyFile, name, c.nodeEnv
	d.addr, d.e2bAddr = net.JoinHostPort(addr, "7070"), net.JoinHostPort(addr, "49983")
	c.startNode(d)
	// Before the harness's cleanup (which would start it as a single
	// box, over plain HTTP): a node the test killed is started again.
	t.Cleanup(func() {
		if d.cmd != nil && d.cmd.ProcessState != nil {
			c.startNode(d)
		}
	})
	c.nodes = append(c.nodes, d)
	c.byName[name] = d
	return d
}

// startNode runs node d's daemon (again, after a kill) and waits until it
// answers. A node answers over TLS only, the certificate its record in
// the store names, and only calls with the cluster key: the test calls it
// directly as a replica does (internal/cluster.NodeTransport), its client keeping
// the caller's key (d.key) beside.
func (c *cluster) startNode(d *daemon) {
	t := c.t
	t.Helper()
	logf, err := os.OpenFile(d.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	d.cmd = d.serveCommand()
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile(c.keyFile)
	if err != nil {
		t.Fatal(err)
	}
	d.key = strings.TrimSpace(string(key))
	// Not t.Context(): cleanup starts a killed node again, after the
	// test's context has ended.
	ctx := context.Background()
	db, err := postgres.Open(ctx, c.url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	nodes := hcluster.NewNodeTransport(hcluster.DeriveKey(d.key))
	started := time.Now().UTC()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if d.cmd.ProcessState != nil || time.Now().After(deadline) {
			_ = d.cmd.Process.Kill() // not left running when the test fails
			_ = d.cmd.Wait()
			b, _ := os.ReadFile(d.logPath)
			t.Fatalf("node %s did not come up; log:\n%s", d.nodeName, b)
		}
		list, err := db.ListNodes(ctx)
		if err != nil {
			continue
		}
		for _, n := range list {
			if n.ID != d.nodeName || n.StartedAt.Before(started.Add(-time.Second)) {
				continue // another, or this one's record from before
			}
			if n.URL != "https://"+d.addr {
				t.Fatalf("node %s advertises %s, want https://%s", d.nodeName, n.URL, d.addr)
			}
			_, via, err := nodes.To(n, n.URL)
			if err != nil {
				t.Fatal(err)
			}
			cl, err := client.New(n.URL, d.key, client.WithHTTPClient(&http.Client{Transport: via}))
			if err != nil {
				t.Fatal(err)
			}
			hctx, cancel := context.WithTimeout(ctx, time.Second)
			_, err = cl.Health(hctx)
			cancel()
			if err == nil {
				d.client = cl
				return
			}
		}
	}
}

// A cluster's network: a bridge in a namespace of its own, which the
// host (this namespace, at 10.231.N.1) and each node's namespace (at
// 10.231.N.10 and up) are linked to by veth pairs: one segment, so that
// the nodes reach each other and the replicas reach them with no
// forwarding on the host. N tells the clusters of tests running at once
// apart.
var clusters atomic.Int32

// ip runs ip(8), failing the test when it fails.
func ip(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// netnsAdd makes network namespace name, removed by the test's cleanup
// (with its ends of the veth pairs, and so the pairs).
func netnsAdd(t *testing.T, name string) {
	t.Helper()
	ip(t, "netns", "add", name)
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v\n%s", name, err, out)
		}
	})
}

// bridge makes the test's bridge and links the host to it.
func (c *cluster) bridge() {
	t := c.t
	br := "hct" + c.suffix + "br"
	netnsAdd(t, br)
	ip(t, "-n", br, "link", "add", "br0", "type", "bridge")
	ip(t, "-n", br, "link", "set", "br0", "up")
	host := "hct" + c.suffix + "h"
	ip(t, "link", "add", host, "type", "veth", "peer", "name", "host", "netns", br)
	ip(t, "-n", br, "link", "set", "host", "master", "br0", "up")
	ip(t, "addr", "add", c.subnet+".1/24", "dev", host)
	ip(t, "link", "set", host, "up")
}

// hostNetns makes node i's namespace, on the bridge, and returns the
// path of the namespace and its address.
func (c *cluster) hostNetns(i int) (netns, addr string) {
	t := c.t
	name := fmt.Sprintf("hct%s%d", c.suffix, i)
	br := "hct" + c.suffix + "br"
	netnsAdd(t, name)
	port := fmt.Sprintf("n%d", i)
	ip(t, "-n", name, "link", "add", "eth0", "type", "veth", "peer", "name", port, "netns", br)
	ip(t, "-n", br, "link", "set", port, "master", "br0", "up")
	addr = fmt.Sprintf("%s.%d", c.subnet, 10+i)
	ip(t, "-n", name, "addr", "add", addr+"/24", "dev", "eth0")
	ip(t, "-n", name, "link", "set", "eth0", "up")
	ip(t, "-n", name, "link", "set", "lo", "up")
	return "/run/netns/" + name, addr
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

	// Spread: nine creates, alternating replicas, land on every node.
	// (Each replica places by the best of two nodes sampled at random:
	// with six, both could leave out the same node once in a few dozen
	// runs.)
	var sandboxes []*client.Sandbox
	used := map[string]int{}
	for i := range 9 {
		sb := c.create(c.replicas[i%2], client.CreateSandboxRequest{})
		sandboxes = append(sandboxes, sb)
		used[sb.Node]++
	}
	if len(used) != 3 {
		t.Errorf("nine sandboxes went to %v, not to all three nodes", used)
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

	c.templatesOnEveryNode(b)
	c.mcpThroughReplicas()
	c.e2bThroughReplicas()

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
	// Whichever daemon marked it, its events say so.
	var nodeLost bool
	for deadline := time.Now().Add(5 * time.Second); !nodeLost && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		evs, err := b.client.ListEvents(ctx, client.EventFilter{SandboxID: victim.ID})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			nodeLost = nodeLost || ev.Type == "sandbox.errored" && ev.Reason == "node_lost" && strings.Contains(ev.Message, "node "+victim.Node+" lost")
		}
	}
	if !nodeLost {
		t.Errorf("no sandbox.errored event with reason node_lost for sandbox %s", victim.ID)
	}
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
	c.startNode(node)
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

// templatesOnEveryNode imports a template through replica r: it is made
// on one node and copied to the others, to a node that joins later too;
// sandboxes of it run on any; deleted, it goes from every node.
func (c *cluster) templatesOnEveryNode(r *daemon) {
	t := c.t
	ctx := t.Context()
	archive := filepath.Join(t.TempDir(), "hello.tar")
	ref, err := name.ParseReference("e2e/hello:v1")
	if err != nil {
		t.Fatal(err)
	}
	if err := tarball.WriteToFile(archive, ref.(name.Tag), helloImage(t)); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	made, err := r.client.ImportTemplate(ctx, "hello", f)
	if err != nil {
		t.Fatal(err)
	}
	// A node that joins after the import gets it too.
	c.addNode("node-late")
	waitTemplate := func(d *daemon, want bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			got, err := d.client.GetTemplate(ctx, "hello")
			if want && err == nil && got.Version == made.Version || !want && client.IsNotFound(err) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("template hello on the node at %s: %+v, %v; want it there: %v", d.addr, got, err, want)
			}
		}
	}
	for _, d := range c.nodes {
		waitTemplate(d, true)
	}
	// Its sandboxes, placed on any node, run it.
	seen := map[string]bool{}
	for i := range 4 {
		sb := c.create(c.replicas[i%2], client.CreateSandboxRequest{Template: "hello"})
		seen[sb.Node] = true
		res, err := r.client.Exec(ctx, sb.ID, client.ExecRequest{Cmd: []string{"/bin/hello"}})
		if err != nil || res.Stdout != "hello from the image as uid 1000\n" {
			t.Errorf("hello on node %s: %+v, %v", sb.Node, res, err)
		}
		if err := r.client.DeleteSandbox(ctx, sb.ID); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("sandboxes of a template imported on one node ran on %d nodes", len(seen))
	// Deleted right after its sandboxes (whose teardowns on other nodes
	// the delete waits for): from every node.
	if err := r.client.DeleteTemplate(ctx, "hello"); err != nil {
		t.Fatal(err)
	}
	for _, d := range c.nodes {
		waitTemplate(d, false)
	}
}

// bearer adds a key to every request.
type bearer struct {
	key  string
	base http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.base.RoundTrip(r)
}

// mcpThroughReplicas: an MCP session opened on one replica makes a
// sandbox and runs a command in it; its requests answered by either
// replica (sessions are stateless there), whichever node holds it. A
// wrong key is refused.
func (c *cluster) mcpThroughReplicas() {
	t := c.t
	ctx := t.Context()
	connect := func(r *daemon, key string) (*mcp.ClientSession, error) {
		transport := &mcp.StreamableClientTransport{
			Endpoint:   "http://" + r.addr + "/mcp",
			HTTPClient: &http.Client{Transport: bearer{key: key, base: http.DefaultTransport}},
			MaxRetries: -1,
		}
		return mcp.NewClient(&mcp.Implementation{Name: "cluster-test"}, nil).Connect(ctx, transport, nil)
	}
	call := func(s *mcp.ClientSession, name string, args map[string]any) string {
		t.Helper()
		res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil || res.IsError || len(res.Content) == 0 {
			t.Fatalf("MCP %s: %+v, %v", name, res, err)
		}
		text, _ := res.Content[0].(*mcp.TextContent)
		if text == nil {
			t.Fatalf("MCP %s: %+v", name, res.Content[0])
		}
		return text.Text
	}
	var id string
	for i, r := range c.replicas {
		s, err := connect(r, c.replicas[0].key)
		if err != nil {
			t.Fatalf("MCP through %s: %v", r.addr, err)
		}
		if i == 0 {
			var made struct {
				SandboxID string `json:"sandbox_id"`
			}
			if err := json.Unmarshal([]byte(call(s, "sandbox_create", map[string]any{"key": "mcp-cluster"})), &made); err != nil || made.SandboxID == "" {
				t.Fatalf("sandbox_create: %+v, %v", made, err)
			}
			id = made.SandboxID
			if sb, err := r.client.GetSandbox(ctx, id); err == nil {
				c.holder(sb).sandboxIDs = append(c.holder(sb).sandboxIDs, id)
			}
		}
		if out := call(s, "sandbox_run_command", map[string]any{"sandbox_id": id, "command": "echo via-mcp"}); !strings.Contains(out, "via-mcp") {
			t.Errorf("sandbox_run_command through %s: %s", r.addr, out)
		}
		_ = s.Close()
	}
	if s, err := connect(c.replicas[1], "hutch_wrong"); err == nil {
		_ = s.Close()
		t.Error("an MCP session with a wrong key was opened")
	}
}

// e2bThroughReplicas: E2B's control plane on a replica (under /e2b)
// creates a sandbox, placed on a node; the replica's E2B sandbox front
// reaches its files on that node with the access token the create gave.
func (c *cluster) e2bThroughReplicas() {
	t := c.t
	ctx := t.Context()
	r := c.replicas[1]
	made := e2bCreate(t, r.addr, r.key)
	sb, err := r.client.GetSandbox(ctx, made.SandboxID)
	if err != nil {
		t.Fatal(err)
	}
	c.holder(sb).sandboxIDs = append(c.holder(sb).sandboxIDs, sb.ID)
	if _, err := r.client.WriteFile(ctx, sb.ID, "e2b.txt", strings.NewReader("through the front")); err != nil {
		t.Fatal(err)
	}
	get, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.e2bAddr+"/files?path=/home/user/workspace/e2b.txt&username=user", nil)
	get.Header.Set("E2b-Sandbox-Id", sb.ID)
	get.Header.Set("X-Access-Token", made.EnvdAccessToken)
	resp, err := http.DefaultClient.Do(get)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "through the front" {
		t.Errorf("envd's /files through the replica's E2B front, sandbox on %s: %d %q", sb.Node, resp.StatusCode, body)
	}
}
