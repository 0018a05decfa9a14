package storetest

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/storage/store"
)

func sampleSecret(workspace, user, name string, at time.Time) *store.Secret {
	return &store.Secret{
		Workspace: workspace, User: user, Name: name, Description: "d", Inject: store.InjectEnv,
		Sealed: []byte("sealed:" + workspace + "/" + user + "/" + name), CreatedAt: at, UpdatedAt: at,
	}
}

// A secret is inserted, then updated keeping its creation time, and its
// placeholder unless another is given; listing orders by workspace, user
// and name; a missing one is not found, saying which.
func testSecretRoundTrip(t *testing.T, h Harness) {
	db := h.Open(t)
	ctx := t.Context()
	t0 := time.Now().UTC()
	t1 := t0.Add(time.Minute)

	proxy := sampleSecret("acme", "", "TOKEN", t0)
	proxy.Inject, proxy.Hosts, proxy.Placeholder = store.InjectProxy, []string{"api.example.com", "*.example.org:443"}, "hutch-secret-TOKEN-1"
	if err := db.PutSecret(ctx, proxy); err != nil {
		t.Fatal(err)
	}
	got, err := db.GetSecret(ctx, "acme", "", "TOKEN")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, proxy) {
		t.Fatalf("round trip changed the record:\n got %+v\nwant %+v", got, proxy)
	}

	for _, tc := range []struct {
		name            string
		inject          string
		hosts           []string
		placeholder     string
		wantPlaceholder string
	}{
		{"a new value keeps the placeholder", store.InjectProxy, []string{"api.example.com"}, "", "hutch-secret-TOKEN-1"},
		{"a placeholder given replaces it", store.InjectProxy, []string{"api.example.com"}, "hutch-secret-TOKEN-2", "hutch-secret-TOKEN-2"},
		{"an env secret has none", store.InjectEnv, nil, "", ""},
	} {
		up := sampleSecret("acme", "", "TOKEN", t1)
		up.Inject, up.Hosts, up.Placeholder, up.Sealed = tc.inject, tc.hosts, tc.placeholder, []byte("new")
		if err := db.PutSecret(ctx, up); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got, err := db.GetSecret(ctx, "acme", "", "TOKEN")
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !got.CreatedAt.Equal(t0) || !got.UpdatedAt.Equal(t1) || got.Placeholder != tc.wantPlaceholder ||
			string(got.Sealed) != "new" || !reflect.DeepEqual(got.Hosts, tc.hosts) || got.Inject != tc.inject {
			t.Errorf("%s: stored %+v", tc.name, got)
		}
		if !up.CreatedAt.Equal(t0) || up.Placeholder != tc.wantPlaceholder {
			t.Errorf("%s: PutSecret did not report what is stored: %+v", tc.name, up)
		}
	}

	for _, s := range []*store.Secret{
		sampleSecret("zeta", "", "A", t0), sampleSecret("acme", "u-2", "A", t0),
		sampleSecret("acme", "", "B", t0), sampleSecret("acme", "u-1", "Z", t0),
	} {
		if err := db.PutSecret(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name      string
		workspace string
		want      []string
	}{
		{"one workspace", "acme", []string{"acme//B", "acme//TOKEN", "acme/u-1/Z", "acme/u-2/A"}},
		{"every workspace", "", []string{"acme//B", "acme//TOKEN", "acme/u-1/Z", "acme/u-2/A", "zeta//A"}},
		{"a workspace with none", "nobody", nil},
	} {
		list, err := db.ListSecrets(ctx, tc.workspace)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, s := range list {
			keys = append(keys, s.Workspace+"/"+s.User+"/"+s.Name)
		}
		if !reflect.DeepEqual(keys, tc.want) {
			t.Errorf("%s: ListSecrets = %q, want %q", tc.name, keys, tc.want)
		}
	}

	if err := db.DeleteSecret(ctx, "acme", "u-1", "Z"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, workspace, user, secret, want string
	}{
		{"deleted", "acme", "u-1", "Z", "user u-1 of workspace acme has no personal secret Z"},
		{"another workspace's", "zeta", "", "B", "workspace zeta has no secret B"},
	} {
		if _, err := db.GetSecret(ctx, tc.workspace, tc.user, tc.secret); !errors.Is(err, errdefs.ErrNotFound) || err.Error() != tc.want {
			t.Errorf("GetSecret of %s: %v, want not found: %s", tc.name, err, tc.want)
		}
		if err := db.DeleteSecret(ctx, tc.workspace, tc.user, tc.secret); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("DeleteSecret of %s: %v, want not found", tc.name, err)
		}
	}
}

// The key check is absent at first, then set and replaced.
func testVaultCheck(t *testing.T, h Harness) {
	db := h.Open(t)
	ctx := t.Context()
	if c, err := db.VaultCheck(ctx); err != nil || c != nil {
		t.Fatalf("VaultCheck of a new database = %q, %v; want none", c, err)
	}
	for _, check := range []string{"one", "two"} {
		if err := db.SetVaultCheck(ctx, []byte(check)); err != nil {
			t.Fatal(err)
		}
		if c, err := db.VaultCheck(ctx); err != nil || string(c) != check {
			t.Fatalf("VaultCheck = %q, %v; want %q", c, err, check)
		}
	}
}

// ResealAll replaces every sealed value and the check together, or, when
// the secrets given are not those stored, nothing.
func testResealAll(t *testing.T, h Harness) {
	t0 := time.Now().UTC()
	// resealed returns the stored secrets sealed anew (as a rotation would),
	// changed by edit.
	resealed := func(stored []*store.Secret, edit func([]*store.Secret) []*store.Secret) []*store.Secret {
		var out []*store.Secret
		for _, s := range stored {
			c := *s
			c.Sealed = []byte("resealed:" + s.Name)
			out = append(out, &c)
		}
		return edit(out)
	}
	for _, tc := range []struct {
		name string
		edit func([]*store.Secret) []*store.Secret
		ok   bool
	}{
		{"every secret", func(s []*store.Secret) []*store.Secret { return s }, true},
		{"one left out", func(s []*store.Secret) []*store.Secret { return s[1:] }, false},
		{"one that is not stored", func(s []*store.Secret) []*store.Secret {
			return append(s[1:], sampleSecret("acme", "", "GONE", t0))
		}, false},
		{"one updated since it was read", func(s []*store.Secret) []*store.Secret {
			s[1].UpdatedAt = s[1].UpdatedAt.Add(time.Second)
			return s
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := h.Open(t)
			ctx := t.Context()
			for _, s := range []*store.Secret{sampleSecret("acme", "", "A", t0), sampleSecret("acme", "u-1", "B", t0), sampleSecret("zeta", "", "C", t0)} {
				if err := db.PutSecret(ctx, s); err != nil {
					t.Fatal(err)
				}
			}
			if err := db.SetVaultCheck(ctx, []byte("old check")); err != nil {
				t.Fatal(err)
			}
			before, err := db.ListSecrets(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			err = db.ResealAll(ctx, resealed(before, tc.edit), []byte("new check"))
			after, lerr := db.ListSecrets(ctx, "")
			check, cerr := db.VaultCheck(ctx)
			if lerr != nil || cerr != nil {
				t.Fatal(lerr, cerr)
			}
			if !tc.ok {
				if !errors.Is(err, errdefs.ErrConflict) {
					t.Fatalf("ResealAll: %v, want a conflict", err)
				}
				if !reflect.DeepEqual(after, before) || string(check) != "old check" {
					t.Fatalf("a refused ResealAll changed something: %+v, check %q", after, check)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(check) != "new check" || len(after) != len(before) {
				t.Fatalf("after ResealAll: check %q, %d secrets", check, len(after))
			}
			for i, s := range after {
				want := *before[i]
				want.Sealed = []byte("resealed:" + s.Name)
				if !reflect.DeepEqual(*s, want) {
					t.Errorf("resealed %s: got %+v, want %+v (only Sealed changes)", s.Name, s, want)
				}
			}
		})
	}
}
