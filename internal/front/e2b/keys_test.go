package e2b

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/storage/store"
	"github.com/hutchdev/hutch/internal/trust/apikeys"
)

// fakeKeys is a Keys over a list, counting its listings.
type fakeKeys struct {
	keys  []*apikeys.Key
	lists atomic.Int64
}

func (f *fakeKeys) Lookup(_ context.Context, key string) (*apikeys.Key, error) {
	for _, k := range f.keys {
		if "hutch_"+k.Name == key {
			return k, nil
		}
	}
	return nil, errdefs.NotFound("no key")
}

func (f *fakeKeys) List(_ context.Context, ws string) ([]*apikeys.Key, error) {
	f.lists.Add(1)
	var out []*apikeys.Key
	for _, k := range f.keys {
		if ws == "" || k.Workspace == ws {
			out = append(out, k)
		}
	}
	return out, nil
}

// newFakeKeys makes n keys of workspace ws, k0 to k<n-1>.
func newFakeKeys(ws string, n int) *fakeKeys {
	f := &fakeKeys{}
	for i := range n {
		f.keys = append(f.keys, &apikeys.Key{Name: fmt.Sprintf("k%d", i), Workspace: ws, CreatedAt: time.Unix(0, int64(i+1))})
	}
	return f
}

// The keyring lists the daemon's key and the workspace's, reads the
// store again only when its list is keyringTTL old, and the control
// plane binds a caller's tokens to its key.
func TestKeyring(t *testing.T) {
	t.Parallel()
	keys := newFakeKeys("acme", 2)
	keys.keys = append(keys.keys, &apikeys.Key{Name: "other", Workspace: "other", CreatedAt: time.Unix(0, 9)})
	now := time.Unix(100, 0)
	k := newKeyring(keys, newTokens("hutch_key"))
	k.now = func() time.Time { return now }
	hs, err := k.holders(t.Context(), "acme")
	if err != nil || len(hs) != 3 || hs[0] != (holder{}) || hs[1] != (holder{name: "k0", made: 1}) || hs[2] != (holder{name: "k1", made: 2}) {
		t.Fatalf("holders(acme) = %v, %v", hs, err)
	}
	if hs, _ := k.holders(t.Context(), "nokeys"); len(hs) != 1 || hs[0] != (holder{}) {
		t.Errorf("holders of a workspace without keys: %v", hs)
	}
	keys.keys = keys.keys[1:] // k0 deleted
	now = now.Add(keyringTTL / 2)
	if hs, _ := k.holders(t.Context(), "acme"); len(hs) != 3 || keys.lists.Load() != 1 {
		t.Errorf("within the TTL: %v after %d listings, want the list kept", hs, keys.lists.Load())
	}
	now = now.Add(keyringTTL / 2)
	if hs, _ := k.holders(t.Context(), "acme"); len(hs) != 2 || hs[1].name != "k1" {
		t.Errorf("after the TTL: %v, want k0 gone", hs)
	}
	for key, want := range map[string]holder{"hutch_daemon": {}, "hutch_k1": {name: "k1", made: 2}} {
		if h, err := resolveHolder(t.Context(), keys, "hutch_daemon", key); err != nil || h != want {
			t.Errorf("resolveHolder(%s) = %v, %v; want %v", key, h, err, want)
		}
	}
	if _, err := resolveHolder(t.Context(), keys, "hutch_daemon", "hutch_k0"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("resolveHolder of a deleted key: %v", err)
	}
}

// BenchmarkFrontCheck measures the front's check of a call's token and
// of a signed /files URL against the live keys of a workspace of 20 keys,
// the match being the last key's (the most hashes).
func BenchmarkFrontCheck(b *testing.B) {
	const n = 20
	f := NewFront(FrontConfig{DaemonKey: attackDaemonKey, Keys: newFakeKeys("acme", n)})
	sb := &store.Sandbox{ID: "sbx-bench", Workspace: "acme"}
	last := holder{name: fmt.Sprintf("k%d", n-1), made: n}
	token := f.keyring.tokens.token("envd", sb.ID, last)
	b.Run("access token", func(b *testing.B) {
		r := httptest.NewRequest(http.MethodPost, "/process.Process/List", nil)
		r.Header.Set(headerAccessToken, token)
		for b.Loop() {
			if c, err := f.callerOf(r, sb); err != nil || c.access == nil || *c.access != last {
				b.Fatal(c, err)
			}
		}
	})
	b.Run("signed URL", func(b *testing.B) {
		r := httptest.NewRequest(http.MethodGet, "/files?path=a.txt&username=user&signature="+signFiles(token, "a.txt", "read", "user", ""), nil)
		for b.Loop() {
			if c, err := f.callerOf(r, sb); err != nil || c.signed == nil || *c.signed != last {
				b.Fatal(c, err)
			}
		}
	})
	b.Run("wrong token", func(b *testing.B) {
		r := httptest.NewRequest(http.MethodPost, "/process.Process/List", nil)
		r.Header.Set(headerAccessToken, "0123")
		r.Header.Set(headerTrafficToken, "0123")
		for b.Loop() {
			if c, err := f.callerOf(r, sb); err != nil || c.key() != nil {
				b.Fatal(c, err)
			}
		}
	})
}
