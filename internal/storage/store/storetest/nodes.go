package storetest

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// live are the states a lost node's sandboxes leave for error in these
// tests (the daemon passes its own).
var live = []store.State{store.Running, store.Paused}

func sampleNode(id string, beat time.Time) *store.Node {
	return &store.Node{
		ID: id, URL: "https://10.0.0.1:7070", Fingerprint: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", State: store.NodeUp, StartedAt: beat.Add(-time.Minute), HeartbeatAt: beat,
		Report: store.NodeReport{
			E2BURL: "http://10.0.0.1:49983", CPUs: 8, MemoryMB: 32768, CommittedCPUs: 1.5, CommittedMemoryMB: 512,
			Sandboxes: 3, Runtimes: []string{"runc", "gvisor"}, DefaultRuntime: "gvisor", DefaultTemplate: "base",
			Templates: map[string]string{"base": "20261126T000000Z", "host": "1"}, Warm: map[string]int{"base@gvisor": 2},
			Version: "v1",
		},
	}
}

func testNodes(t *testing.T, h Harness) {
	db := h.Open(t)
	ctx := t.Context()
	beat := now()
	a, b := sampleNode("a", beat), sampleNode("b", beat)
	b.Report.Warm = nil
	for _, n := range []*store.Node{b, a} {
		if err := db.PutNode(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	got, err := db.ListNodes(ctx)
	if err != nil || len(got) != 2 || !reflect.DeepEqual(got[0], a) || !reflect.DeepEqual(got[1], b) {
		t.Fatalf("ListNodes = %+v, %v; want a then b as put", got, err)
	}

	// A heartbeat replaces the record, the certificate's fingerprint too.
	a.HeartbeatAt = beat.Add(time.Second)
	a.Report.Sandboxes = 4
	a.Fingerprint = "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae" // a new certificate
	if err := db.PutNode(ctx, a); err != nil {
		t.Fatal(err)
	}
	if got, err := db.ListNodes(ctx); err != nil || !reflect.DeepEqual(got[0], a) {
		t.Errorf("after a heartbeat: %+v, %v", got[0], err)
	}

	if err := db.DeleteNode(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteNode(ctx, "b"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("deleting a node twice: %v, want not found", err)
	}
}

func testNodeLostRace(t *testing.T, h Harness) {
	db := h.Open(t)
	ctx := t.Context()
	beat := now()
	if err := db.PutNode(ctx, sampleNode("a", beat)); err != nil {
		t.Fatal(err)
	}
	sandboxes := map[string]store.State{"run": store.Running, "zz": store.Suspended, "stop": store.Stopped}
	for id, state := range sandboxes {
		sb := Sample(id)
		sb.Node, sb.State = "a", state
		if err := db.CreateSandbox(ctx, sb); err != nil {
			t.Fatal(err)
		}
	}
	other := Sample("elsewhere")
	other.Node = "b"
	if err := db.CreateSandbox(ctx, other); err != nil {
		t.Fatal(err)
	}

	// A heartbeat after the bound: not lost.
	if marked, err := db.MarkNodeLost(ctx, "a", beat, "no heartbeat", live, now()); marked || err != nil {
		t.Errorf("a node that beat at the bound: marked %v, %v", marked, err)
	}

	// Several daemons notice at once: one marks it.
	const n = 8
	type result struct {
		marked bool
		err    error
	}
	results := make(chan result, n)
	for range n {
		go func() {
			marked, err := db.MarkNodeLost(ctx, "a", beat.Add(time.Second), "node a lost: no heartbeat", live, now())
			results <- result{marked, err}
		}()
	}
	marked := 0
	for range n {
		r := <-results
		if r.err != nil {
			t.Errorf("MarkNodeLost: %v", r.err)
		}
		if r.marked {
			marked++
		}
	}
	if marked != 1 {
		t.Errorf("%d racing calls marked the node, want 1", marked)
	}
	nodes, err := db.ListNodes(ctx)
	if err != nil || nodes[0].State != store.NodeLost || nodes[0].Reason != "node a lost: no heartbeat" {
		t.Errorf("the lost node: %+v, %v", nodes[0], err)
	}

	// Its live sandbox failed with the reason; its suspended and stopped
	// ones, and another node's, are as they were.
	want := map[string]store.State{"run": store.Error, "zz": store.Suspended, "stop": store.Stopped, "elsewhere": store.Running}
	for id, state := range want {
		sb, err := db.GetSandbox(ctx, id)
		if err != nil || sb.State != state {
			t.Errorf("sandbox %s: %+v, %v; want %s", id, sb, err, state)
			continue
		}
		if state == store.Error && sb.StateReason != "node a lost: no heartbeat" {
			t.Errorf("sandbox %s's reason: %q", id, sb.StateReason)
		}
	}

	// It beats again: up.
	back := sampleNode("a", now())
	if err := db.PutNode(ctx, back); err != nil {
		t.Fatal(err)
	}
	if nodes, err := db.ListNodes(ctx); err != nil || nodes[0].State != store.NodeUp {
		t.Errorf("a lost node that beat again: %+v, %v", nodes[0], err)
	}
}

func testClusterTemplates(t *testing.T, h Harness) {
	db := h.Open(t)
	ctx := t.Context()
	publish := func(version, origin string) bool {
		t.Helper()
		ok, err := db.PublishTemplate(ctx, &store.ClusterTemplate{Name: "py", Version: version, Origin: origin, Info: []byte(`{"v":"` + version + `"}`), UpdatedAt: now()})
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !publish("20261126T100000000Z", "a") {
		t.Error("the first version of a name was not published")
	}
	if publish("20261126T090000000Z", "b") || publish("20261126T100000000Z", "b") {
		t.Error("an older or the same version replaced the newer")
	}
	if !publish("20261126T110000000Z", "c") {
		t.Error("a newer version was not published")
	}
	list, err := db.ListClusterTemplates(ctx)
	if err != nil || len(list) != 1 || list[0].Version != "20261126T110000000Z" || list[0].Origin != "c" || string(list[0].Info) != `{"v":"20261126T110000000Z"}` {
		t.Fatalf("ListClusterTemplates = %+v, %v", list, err)
	}
	for range 2 { // absent the second time: fine
		if err := db.UnpublishTemplate(ctx, "py"); err != nil {
			t.Fatal(err)
		}
	}
	if list, err := db.ListClusterTemplates(ctx); err != nil || len(list) != 0 {
		t.Errorf("after unpublishing: %+v, %v", list, err)
	}
}

func testMoveSandbox(t *testing.T, h Harness) {
	db := h.Open(t)
	ctx := t.Context()
	sb := Sample("mv")
	sb.Node, sb.State = "a", store.Running
	if err := db.CreateSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	// Not suspended: no image, no move.
	if err := db.SetImage(ctx, "mv", "a", "g1"); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("an image of a running sandbox: %v, want a conflict", err)
	}
	if err := db.ChangeState(ctx, store.StateChange{ID: "mv", From: []store.State{store.Running}, To: store.Suspended, At: now()}); err != nil {
		t.Fatal(err)
	}
	if err := db.MoveSandbox(ctx, "mv", "a", "b", now()); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("a move without an image: %v, want a conflict", err)
	}
	if err := db.SetImage(ctx, "mv", "b", "g1"); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("an image set by a node that does not hold it: %v, want a conflict", err)
	}
	if err := db.SetImage(ctx, "mv", "a", "g1"); err != nil {
		t.Fatal(err)
	}
	// Two replicas move it at once: one does.
	errs := make(chan error, 2)
	for _, to := range []string{"b", "c"} {
		go func() { errs <- db.MoveSandbox(ctx, "mv", "a", to, now()) }()
	}
	moved := 0
	for range 2 {
		if err := <-errs; err == nil {
			moved++
		} else if !errors.Is(err, errdefs.ErrConflict) {
			t.Errorf("racing move: %v", err)
		}
	}
	got, err := db.GetSandbox(ctx, "mv")
	if err != nil || moved != 1 || got.Node != "b" && got.Node != "c" || got.Image != "g1" {
		t.Errorf("after racing moves (%d applied): %+v, %v", moved, got, err)
	}
	// Its new node clears the image once it runs again.
	if err := db.SetImage(ctx, "mv", got.Node, ""); err != nil {
		t.Fatal(err)
	}
	if got, err := db.GetSandbox(ctx, "mv"); err != nil || got.Image != "" {
		t.Errorf("after clearing the image: %+v, %v", got, err)
	}
	if err := db.MoveSandbox(ctx, "gone", "a", "b", now()); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("moving a sandbox that is not there: %v", err)
	}
}
