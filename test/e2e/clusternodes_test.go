package e2e

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
)

// hutch node ls through a replica: both nodes up, at their addresses,
// the one holding a sandbox counting it; one killed, it is listed lost,
// saying why, once its --node-timeout has passed, while the other stays
// up.
func TestClusterNodes(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 2, 1)
	r := c.replicas[0]
	sb := c.create(r, client.CreateSandboxRequest{})
	holder := c.holder(sb)
	victim := c.nodes[0]
	if victim == holder {
		victim = c.nodes[1]
	}
	ls := func() map[string]client.Node {
		t.Helper()
		out, stderr, code := r.cli("", "node", "ls", "-o", "json")
		var list []client.Node
		if err := json.Unmarshal([]byte(out), &list); code != 0 || err != nil {
			t.Fatalf("hutch node ls -o json: exit %d, %v\n%s%s", code, err, out, stderr)
		}
		byID := map[string]client.Node{}
		for _, n := range list {
			byID[n.ID] = n
		}
		return byID
	}

	// Both up; the holder's next heartbeat counts the sandbox.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		nodes := ls()
		ok := len(nodes) == 2 && nodes[holder.nodeName].Sandboxes == 1
		for _, d := range c.nodes {
			n := nodes[d.nodeName]
			if n.State != "up" || n.Role != "node" || n.URL != "https://"+d.addr || !slices.Contains(n.Runtimes, "runc") || n.Version == "" || n.CPUs <= 0 {
				ok = false
			}
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("hutch node ls: %+v; want both nodes up, %s holding one sandbox", nodes, holder.nodeName)
		}
	}
	out, stderr, code := r.cli("", "node", "ls")
	if code != 0 || strings.Count(out, " up ") != 2 || !strings.Contains(out, victim.nodeName) {
		t.Errorf("hutch node ls: exit %d\n%s%s", code, out, stderr)
	}

	// One killed: lost once its timeout has passed (the replica reads the
	// store on each call), the other still up.
	killed := time.Now()
	victim.kill()
	for deadline := killed.Add(clusterTimeout + time.Second); ; time.Sleep(100 * time.Millisecond) {
		nodes := ls()
		if n := nodes[victim.nodeName]; n.State == "lost" {
			if !strings.Contains(n.Reason, "node "+victim.nodeName+" lost") || nodes[holder.nodeName].State != "up" {
				t.Errorf("after the kill: %+v", nodes)
			}
			t.Logf("node %s listed lost %v after its kill (timeout %v)", victim.nodeName, time.Since(killed).Round(time.Millisecond), clusterTimeout)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s not listed lost %v after its kill: %+v", victim.nodeName, time.Since(killed), nodes[victim.nodeName])
		}
	}
	out, stderr, code = r.cli("", "node", "ls")
	if code != 0 || !strings.Contains(out, " lost ") || !strings.Contains(out, "node "+victim.nodeName+" lost: no heartbeat since") {
		t.Errorf("hutch node ls after the kill: exit %d\n%s%s", code, out, stderr)
	}
}
