package sqlite

import (
	"strconv"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/storage/store"
	"github.com/hutchdev/hutch/internal/storage/store/storetest"
)

// BenchmarkSandboxLifecycle is the store's share of one create → exec →
// delete: the statements the daemon runs for it, in its order.
func BenchmarkSandboxLifecycle(b *testing.B) {
	db, err := Open(b.Context(), b.TempDir()+"/hutch.db")
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := db.Close(); err != nil {
			b.Error(err)
		}
	}()
	ctx := b.Context()
	i := 0
	for b.Loop() {
		i++
		id := "s" + strconv.Itoa(i)
		sb := storetest.Sample(id)
		sb.State = store.Creating
		if err := db.CreateSandbox(ctx, sb); err != nil {
			b.Fatal(err)
		}
		for _, c := range []store.StateChange{
			{ID: id, From: []store.State{store.Creating}, To: store.Running, Reason: "created", At: time.Now()},
			{ID: id, From: []store.State{store.Running, store.Paused}, To: store.Deleting, Reason: "deleted", At: time.Now()},
		} {
			if _, err := db.GetSandbox(ctx, id); err != nil {
				b.Fatal(err)
			}
			if err := db.ChangeState(ctx, c); err != nil {
				b.Fatal(err)
			}
		}
		if err := db.DeleteSandbox(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
}
