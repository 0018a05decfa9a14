package audit

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hutchdev/hutch/internal/storage/store/sqlite"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Entries recorded by many callers at once are all listed, newest first,
// by a listing made right after them; those recorded after Close are
// written too.
func TestLog(t *testing.T) {
	t.Parallel()
	db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "hutch.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	l := New(db, nil)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			for j := range 50 {
				l.Record(t.Context(), Entry{Time: time.Now(), Workspace: fmt.Sprint("ws-", i%2), Action: "POST /v1/sandboxes", Object: fmt.Sprint(i, "-", j), Status: 201})
			}
		})
	}
	wg.Wait()
	all, err := l.List(t.Context(), Filter{Limit: 5000})
	if err != nil || len(all) != 1000 || all[0].ID != 1000 || all[999].ID != 1 {
		t.Fatalf("List after 1000 entries: %d entries, %v", len(all), err)
	}
	if ws, err := l.List(t.Context(), Filter{Workspace: "ws-1", Limit: 5000}); err != nil || len(ws) != 500 {
		t.Errorf("List of ws-1: %d entries, %v", len(ws), err)
	}
	l.Close()
	l.Record(t.Context(), Entry{Time: time.Now(), Action: "DELETE /v1/sandboxes/{id}", Status: 204})
	if last, err := l.List(t.Context(), Filter{Limit: 1}); err != nil || len(last) != 1 || last[0].Action != "DELETE /v1/sandboxes/{id}" {
		t.Errorf("an entry recorded after Close: %+v, %v", last, err)
	}
}
