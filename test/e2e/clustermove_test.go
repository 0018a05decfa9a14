package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/storage/imagestore/s3test"
	"github.com/hutchdev/hutch/internal/storage/store"
	"github.com/hutchdev/hutch/internal/storage/store/postgres"
)

// With a shared image store, a suspended sandbox of a lost node resumes on
// another one: under runc with its files, under gVisor with its memory (a
// background counter goes on from where it was, not from 1). The store is
// a bucket of a real S3 server the test starts (versitygw, built from the
// Go module proxy: internal/storage/imagestore/s3test) on the cluster's bridge;
// where that cannot be built, a directory all nodes see, as an NFS mount
// would be (the nodes here are namespaces of one machine).
func TestClusterMove(t *testing.T) {
	t.Parallel()
	c := startClusterWith(t, 2, 1, func(c *cluster) ([]string, []string) {
		if _, err := s3test.Binary(t.Context()); err != nil {
			t.Logf("the image store is a directory: no S3 server here (%v)", err)
			return []string{"--image-store", t.TempDir()}, nil
		}
		b := s3test.StartOn(t, c.subnet+".1")
		t.Logf("the image store is %s", b)
		return []string{"--image-store", b.URL("hutch")},
			[]string{"AWS_ACCESS_KEY_ID=" + b.AccessKey, "AWS_SECRET_ACCESS_KEY=" + b.SecretKey}
	})
	ctx := t.Context()
	from, r := c.nodes[0], c.replicas[0]
	db, err := postgres.Open(ctx, c.url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()

	// Made on node-1 directly, suspended through the replica.
	type moving struct {
		sb      *client.Sandbox
		counted int // the gVisor counter's value before the suspend
	}
	var all []moving
	runcSB, err := from.client.CreateSandbox(ctx, client.CreateSandboxRequest{Runtime: "runc"})
	if err != nil {
		t.Fatal(err)
	}
	if res := from.exec(runcSB.ID, "echo kept > moved.txt && mkdir -p d && echo x > d/f && rm -f /etc/motd"); res.ExitCode != 0 {
		t.Fatalf("write: %+v", res)
	}
	all = append(all, moving{sb: runcSB})
	if runscBin != "" {
		gv, err := from.client.CreateSandbox(ctx, client.CreateSandboxRequest{Runtime: "gvisor"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := from.client.StartProcess(ctx, gv.ID, client.StartProcessRequest{Name: "counter",
			Command: "n=0; while true; do n=$((n+1)); echo $n > /tmp/count; sleep 0.1; done"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		all = append(all, moving{sb: gv, counted: readCount(t, from, gv.ID)})
	}
	for i := range all {
		if _, err := r.client.SuspendSandbox(ctx, all[i].sb.ID); err != nil {
			t.Fatal(err)
		}
	}
	// Their images uploaded (in the background, after the suspend).
	for _, m := range all {
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			rec, err := db.GetSandbox(ctx, m.sb.ID)
			if err == nil && rec.Image != "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no image of suspended sandbox %s after 60 s: %+v, %v", m.sb.ID, rec, err)
			}
		}
	}

	// node-1 is lost; a call wakes each sandbox on node-2.
	from.kill()
	for deadline := time.Now().Add(clusterTimeout + 3*time.Second); ; time.Sleep(100 * time.Millisecond) {
		if nodeState(t, db, "node-1") == store.NodeLost {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("node-1 not marked lost after its kill")
		}
	}
	to := c.nodes[1]
	for _, m := range all {
		began := time.Now()
		res, err := r.client.Exec(ctx, m.sb.ID, client.ExecRequest{Command: "cat moved.txt 2>/dev/null; cat /tmp/count 2>/dev/null; true"})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("exec on %s sandbox %s after its node was lost: %+v, %v", m.sb.Runtime, m.sb.ID, res, err)
		}
		t.Logf("%s sandbox resumed on another node in %v", m.sb.Runtime, time.Since(began).Round(time.Millisecond))
		sb, err := r.client.GetSandbox(ctx, m.sb.ID)
		if err != nil || sb.Node != "node-2" || sb.State != "running" {
			t.Errorf("after the move: %+v, %v", sb, err)
		}
		to.sandboxIDs = append(to.sandboxIDs, m.sb.ID)
		switch m.sb.Runtime {
		case "runc":
			if res.Stdout != "kept\n" {
				t.Errorf("the runc sandbox's files after the move: %q", res.Stdout)
			}
		case "gvisor":
			// The counter went on from its value: its memory came along.
			time.Sleep(500 * time.Millisecond)
			now := readCount(t, r, m.sb.ID)
			if now < m.counted {
				t.Errorf("the gVisor counter was %d before the suspend, %d after the move: its memory was lost", m.counted, now)
			}
			t.Logf("the gVisor counter: %d before, %d after the move", m.counted, now)
		}
	}
	// Its image is dropped once it runs on node-2.
	for _, m := range all {
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			if rec, err := db.GetSandbox(ctx, m.sb.ID); err == nil && rec.Image == "" {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("sandbox %s still has its image after it ran on node-2", m.sb.ID)
				break
			}
		}
	}
	// node-1 back: what it had of them goes (its cleanup checks nothing
	// is left of them there).
	c.startNode(from)
}

// readCount reads the gVisor counter through d.
func readCount(t *testing.T, d *daemon, id string) int {
	t.Helper()
	res, err := d.client.Exec(t.Context(), id, client.ExecRequest{Command: "cat /tmp/count"})
	if err != nil {
		t.Fatalf("read the counter: %v", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(res.Stdout))
	if err != nil {
		t.Fatalf("the counter: %+v", res)
	}
	return n
}

// nodeState is node id's state in the store.
func nodeState(t *testing.T, db *postgres.DB, id string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	nodes, err := db.ListNodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.ID == id {
			return n.State
		}
	}
	return ""
}
