package storetest

import (
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/storage/store"
)

func testEvents(t *testing.T, h Harness) {
	db := h.Open(t)
	ctx := t.Context()
	at := now()
	old := at.Add(-48 * time.Hour)
	events := []*store.Event{
		{Time: old, Workspace: "acme", Sandbox: "sb1", Type: "sandbox.created", Reason: "created", Message: "made"},
		{Time: at, Workspace: "other", Sandbox: "sb2", Type: "sandbox.created", Reason: "created"},
		{Time: at, Workspace: "acme", Sandbox: "sb1", Type: "sandbox.errored", Reason: "oom", Message: "out of memory", Data: map[string]string{"template": "base"}},
	}
	if err := db.AppendEvents(ctx, events...); err != nil {
		t.Fatal(err)
	}
	for i, e := range events {
		if e.ID != int64(i+1) {
			t.Fatalf("event %d got ID %d, want %d", i, e.ID, i+1)
		}
	}
	acme, err := db.ListEvents(ctx, store.EventFilter{Workspace: "acme"})
	if err != nil || len(acme) != 2 || !reflect.DeepEqual(acme[1], events[2]) || !reflect.DeepEqual(acme[0], events[0]) {
		t.Fatalf("acme's events: %+v, %v; want %+v and %+v", acme, err, events[0], events[2])
	}
	if l, err := db.ListEvents(ctx, store.EventFilter{After: 1, Limit: 1}); err != nil || len(l) != 1 || l[0].ID != 2 {
		t.Errorf("after 1, one: %+v, %v", l, err)
	}
	if l, err := db.ListEvents(ctx, store.EventFilter{Sandbox: "sb2"}); err != nil || len(l) != 1 || l[0].Workspace != "other" {
		t.Errorf("sb2's: %+v, %v", l, err)
	}
	if l, err := db.ListEvents(ctx, store.EventFilter{After: 3}); err != nil || l == nil || len(l) != 0 {
		t.Errorf("after the last: %#v, %v; want an empty list", l, err)
	}
	if err := db.AppendDelivery(ctx, &store.Delivery{Webhook: "wh1", Event: 1, Attempt: 1, Time: old, Status: 500}); err != nil {
		t.Fatal(err)
	}
	if err := db.PruneEvents(ctx, at.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if l, err := db.ListEvents(ctx, store.EventFilter{}); err != nil || len(l) != 2 || l[0].ID != 2 {
		t.Errorf("after pruning the old one: %+v, %v", l, err)
	}
	if l, err := db.ListDeliveries(ctx, "wh1", 0); err != nil || len(l) != 0 {
		t.Errorf("an old delivery after pruning: %+v, %v", l, err)
	}
	// IDs keep going up after a prune and from concurrent appends.
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if err := db.AppendEvents(ctx, &store.Event{Time: at, Type: "sandbox.deleted"}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	all, err := db.ListEvents(ctx, store.EventFilter{Limit: 1000})
	if err != nil || len(all) != 10 {
		t.Fatalf("after 8 concurrent appends: %d events, %v", len(all), err)
	}
	for i := 1; i < len(all); i++ {
		if all[i].ID <= all[i-1].ID {
			t.Errorf("IDs out of order: %d after %d", all[i].ID, all[i-1].ID)
		}
	}
}

func testWebhooks(t *testing.T, h Harness) {
	db := h.Open(t)
	ctx := t.Context()
	at := now()
	a := &store.Webhook{ID: "wh1", Workspace: "acme", URL: "https://hooks.test/a", Types: []string{"sandbox.created"}, SealedSecret: []byte{1, 2, 3}, CreatedAt: at}
	b := &store.Webhook{ID: "wh2", Workspace: "other", URL: "https://hooks.test/b", SealedSecret: []byte{4}, CreatedAt: at.Add(time.Second)}
	for _, w := range []*store.Webhook{a, b} {
		if err := db.CreateWebhook(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.CreateWebhook(ctx, a); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("a second wh1: %v, want ErrAlreadyExists", err)
	}
	if l, err := db.ListWebhooks(ctx, "acme"); err != nil || len(l) != 1 || !reflect.DeepEqual(l[0], a) {
		t.Errorf("acme's webhooks: %+v, %v; want %+v", l, err, a)
	}
	if l, err := db.ListWebhooks(ctx, ""); err != nil || len(l) != 2 || !reflect.DeepEqual(l[1], b) {
		t.Errorf("every webhook: %+v, %v", l, err)
	}
	for i := range 3 {
		d := &store.Delivery{Webhook: "wh1", Event: 7, Attempt: i + 1, Time: at, Status: 500 - i*100, Error: "", Duration: time.Millisecond}
		if err := db.AppendDelivery(ctx, d); err != nil || d.ID == 0 {
			t.Fatalf("AppendDelivery: %+v, %v", d, err)
		}
	}
	l, err := db.ListDeliveries(ctx, "wh1", 2)
	if err != nil || len(l) != 2 || l[0].Attempt != 3 || l[0].Status != 300 || l[0].Duration != time.Millisecond || !l[0].Time.Equal(at) {
		t.Errorf("wh1's latest two deliveries: %+v, %v", l, err)
	}
	if err := db.DeleteWebhook(ctx, "other", "wh1"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("another workspace deleting wh1: %v, want ErrNotFound", err)
	}
	if err := db.DeleteWebhook(ctx, "acme", "wh1"); err != nil {
		t.Fatal(err)
	}
	if l, err := db.ListDeliveries(ctx, "wh1", 0); err != nil || len(l) != 0 {
		t.Errorf("a deleted webhook's deliveries: %+v, %v", l, err)
	}
	if l, _ := db.ListWebhooks(ctx, ""); len(l) != 1 || l[0].ID != "wh2" {
		t.Errorf("after the delete: %+v", l)
	}
}
