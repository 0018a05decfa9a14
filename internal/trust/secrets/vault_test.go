package secrets_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/storage/store"
	"github.com/hutchdev/hutch/internal/storage/store/sqlite"
	"github.com/hutchdev/hutch/internal/trust/secrets"
)

// The consumer owns the interface; the SQLite store has it.
var _ store.Secrets = (*sqlite.DB)(nil)

type fixture struct {
	dir    string
	dbPath string
	db     *sqlite.DB
	src    secrets.KeySource
	vault  *secrets.Vault
}

// newFixture opens a real SQLite store in a temp dir and a vault over it
// whose key file is made there.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{dir: dir, dbPath: filepath.Join(dir, "hutch.db")}
	db, err := sqlite.Open(t.Context(), f.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	f.db = db
	f.src = secrets.KeySource{File: filepath.Join(dir, "secrets.key"), Create: true}
	f.vault = f.open(t, f.src)
	return f
}

func (f *fixture) open(t *testing.T, src secrets.KeySource) *secrets.Vault {
	t.Helper()
	v, err := secrets.Open(t.Context(), f.db, src, nil)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func set(t *testing.T, v *secrets.Vault, req secrets.SetRequest) secrets.Info {
	t.Helper()
	info, err := v.Set(t.Context(), req)
	if err != nil {
		t.Fatalf("Set %s: %v", req.Name, err)
	}
	return info
}

// values resolves and returns name → "value (scope)".
func values(t *testing.T, v *secrets.Vault, workspace, user string, names []string) (map[string]string, error) {
	t.Helper()
	res, err := v.Resolve(t.Context(), workspace, user, names)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, r := range res {
		out[r.Name] = r.Value + " (" + r.Scope + ")"
	}
	return out, nil
}

// A user's own secret wins over the workspace's of the same name for that
// user, and only for that user; another user's own is never seen, nor
// another workspace's.
func TestScopes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, r := range []secrets.SetRequest{
		{Workspace: "acme", Name: "A", Value: []byte("ws-a")},
		{Workspace: "acme", Name: "B", Value: []byte("ws-b"), Description: "shared"},
		{Workspace: "acme", User: "u-42", Name: "A", Value: []byte("u42-a")},
		{Workspace: "acme", User: "u-42", Name: "C", Value: []byte("u42-c")},
		{Workspace: "acme", User: "u-7", Name: "D", Value: []byte("u7-d")},
		{Workspace: "other", Name: "A", Value: []byte("other-a")},
	} {
		set(t, f.vault, r)
	}

	for _, tc := range []struct {
		name  string
		user  string
		names []string
		want  map[string]string
		err   string
	}{
		{"the user's own wins", "u-42", nil, map[string]string{"A": "u42-a (user)", "B": "ws-b (workspace)", "C": "u42-c (user)"}, ""},
		{"another user gets the workspace's", "u-7", nil, map[string]string{"A": "ws-a (workspace)", "B": "ws-b (workspace)", "D": "u7-d (user)"}, ""},
		{"no user gets the workspace's alone", "", nil, map[string]string{"A": "ws-a (workspace)", "B": "ws-b (workspace)"}, ""},
		{"narrowed to names", "u-42", []string{"B", "A", "B"}, map[string]string{"A": "u42-a (user)", "B": "ws-b (workspace)"}, ""},
		{"narrowed to none", "u-42", []string{}, map[string]string{}, ""},
		{"another user's own is not there", "u-42", []string{"D", "A", "E"}, nil, "no secrets named D, E in workspace acme (nor among the personal secrets of user u-42)"},
		{"a bad name", "u-42", []string{"1X"}, nil, "not an environment variable name"},
	} {
		t.Run("Resolve/"+tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := values(t, f.vault, "acme", tc.user, tc.names)
			if tc.err != "" {
				if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Resolve: %v, want invalid argument saying %q", err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Resolve = %v, %v; want %v", got, err, tc.want)
			}
		})
	}

	for _, tc := range []struct {
		name      string
		all       bool
		workspace string
		user      string
		want      []string
	}{
		{"a user sees the workspace's and its own", false, "acme", "u-42", []string{"acme//A", "acme//B", "acme/u-42/A", "acme/u-42/C"}},
		{"no user sees the workspace's", false, "acme", "", []string{"acme//A", "acme//B"}},
		{"the administrator sees a workspace's all", true, "acme", "", []string{"acme//A", "acme//B", "acme/u-42/A", "acme/u-42/C", "acme/u-7/D"}},
		{"the administrator sees every workspace's", true, "", "", []string{"acme//A", "acme//B", "acme/u-42/A", "acme/u-42/C", "acme/u-7/D", "other//A"}},
	} {
		t.Run("List/"+tc.name, func(t *testing.T) {
			t.Parallel()
			var list []secrets.Info
			var err error
			if tc.all {
				list, err = f.vault.ListAll(t.Context(), tc.workspace)
			} else {
				list, err = f.vault.List(t.Context(), tc.workspace, tc.user)
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, i := range list {
				got = append(got, i.Workspace+"/"+i.User+"/"+i.Name)
				if want := map[bool]string{true: "workspace", false: "user"}[i.User == ""]; i.Scope != want {
					t.Errorf("%s/%s: scope %q, want %q", i.User, i.Name, i.Scope, want)
				}
				if strings.Contains(fmt.Sprintf("%+v", i), "-a") {
					t.Errorf("a listing shows a value: %+v", i)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// What Set refuses, each with a message that says what to do.
func TestSetValidation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ok := secrets.SetRequest{Workspace: "acme", Name: "TOKEN", Value: []byte("v")}
	for _, tc := range []struct {
		name string
		edit func(*secrets.SetRequest)
		want string // in the message; "" for accepted
	}{
		{"accepted", func(r *secrets.SetRequest) {}, ""},
		{"a personal one", func(r *secrets.SetRequest) { r.User = "ann@example.com" }, ""},
		{"a proxy one", func(r *secrets.SetRequest) {
			r.Inject, r.Hosts = "proxy", []string{"API.Example.com", "*.example.org:8443", "api.example.com"}
		}, ""},
		{"no workspace", func(r *secrets.SetRequest) { r.Workspace = "" }, "no workspace"},
		{"a user id with a space", func(r *secrets.SetRequest) { r.User = "ann smith" }, "is not a user id"},
		{"a name beginning with a digit", func(r *secrets.SetRequest) { r.Name = "1TOKEN" }, "not an environment variable name"},
		{"a name with a dash", func(r *secrets.SetRequest) { r.Name = "MY-TOKEN" }, "not an environment variable name"},
		{"a name too long", func(r *secrets.SetRequest) { r.Name = strings.Repeat("A", 129) }, "not an environment variable name"},
		{"an empty value", func(r *secrets.SetRequest) { r.Value = nil }, "value is empty"},
		{"a value too big", func(r *secrets.SetRequest) { r.Value = bytes.Repeat([]byte("x"), 64<<10+1) }, "more than the 65536"},
		{"a NUL in the value", func(r *secrets.SetRequest) { r.Value = []byte("a\x00b") }, "NUL byte"},
		{"a description too long", func(r *secrets.SetRequest) { r.Description = strings.Repeat("d", 513) }, "description is 513 bytes"},
		{"another way to inject", func(r *secrets.SetRequest) { r.Inject = "file" }, "inject must be env or proxy"},
		{"hosts for an env secret", func(r *secrets.SetRequest) { r.Hosts = []string{"api.example.com"} }, "only for a secret with inject proxy"},
		{"a proxy secret for no host", func(r *secrets.SetRequest) { r.Inject = "proxy" }, "needs the hosts it is for"},
		{"an address", func(r *secrets.SetRequest) { r.Inject, r.Hosts = "proxy", []string{"203.0.113.7:443"} }, "an address, not a name"},
		{"an IPv6 address", func(r *secrets.SetRequest) { r.Inject, r.Hosts = "proxy", []string{"[2001:db8::1]:443"} }, "an address, not a name"},
		{"a single label", func(r *secrets.SetRequest) { r.Inject, r.Hosts = "proxy", []string{"localhost"} }, "not a full domain name"},
		{"a wildcard over a TLD", func(r *secrets.SetRequest) { r.Inject, r.Hosts = "proxy", []string{"*.com"} }, "top-level domain"},
		{"a URL", func(r *secrets.SetRequest) { r.Inject, r.Hosts = "proxy", []string{"https://api.example.com/"} }, `host "https://api.example.com/"`},
		{"port 0", func(r *secrets.SetRequest) { r.Inject, r.Hosts = "proxy", []string{"api.example.com:0"} }, "port is not a number"},
		{"a port too big", func(r *secrets.SetRequest) { r.Inject, r.Hosts = "proxy", []string{"api.example.com:70000"} }, "port is not a number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := ok
			tc.edit(&r)
			info, err := f.vault.Set(t.Context(), r)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Set: %v", err)
				}
				if r.Inject == "proxy" && !reflect.DeepEqual(info.Hosts, []string{"api.example.com", "*.example.org:8443"}) {
					t.Errorf("hosts stored as %q, want lower-cased without repeats", info.Hosts)
				}
				return
			}
			if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Set: %v, want invalid argument saying %q", err, tc.want)
			}
		})
	}
}

// A proxy secret's placeholder is made once and kept when its value
// changes; the sandbox's variable holds it, the proxy gets the value.
func TestProxyPlaceholder(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	req := secrets.SetRequest{Workspace: "acme", Name: "GH_TOKEN", Value: []byte("ghp_one"), Inject: "proxy", Hosts: []string{"api.github.com"}}
	first := set(t, f.vault, req)
	if !regexp.MustCompile(`^hutch-secret-GH_TOKEN-[0-9a-f]{24}$`).MatchString(first.Placeholder) {
		t.Fatalf("placeholder %q", first.Placeholder)
	}
	time.Sleep(time.Millisecond)
	req.Value, req.Hosts = []byte("ghp_two"), []string{"api.github.com", "uploads.github.com"}
	second := set(t, f.vault, req)
	if second.Placeholder != first.Placeholder || !second.CreatedAt.Equal(first.CreatedAt) || !second.UpdatedAt.After(first.UpdatedAt) {
		t.Fatalf("an update changed the placeholder or creation time: %+v then %+v", first, second)
	}
	res, err := f.vault.Resolve(ctx, "acme", "", nil)
	if err != nil || len(res) != 1 {
		t.Fatalf("Resolve: %+v, %v", res, err)
	}
	r := res[0]
	if r.Value != "ghp_two" || r.EnvValue() != first.Placeholder || r.Inject != "proxy" || len(r.Hosts) != 2 {
		t.Errorf("Resolved %s: inject %s, env %q, hosts %q", r.Name, r.Inject, r.EnvValue(), r.Hosts)
	}
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		if s := fmt.Sprintf(format, r); strings.Contains(s, "ghp_two") {
			t.Errorf("%s of a Resolved prints the value: %s", format, s)
		}
	}

	// As an env secret it has none; as a proxy one again, a new one.
	env := set(t, f.vault, secrets.SetRequest{Workspace: "acme", Name: "GH_TOKEN", Value: []byte("ghp_three")})
	if env.Placeholder != "" || env.Hosts != nil {
		t.Errorf("an env secret keeps proxy fields: %+v", env)
	}
	if res, _ := f.vault.Resolve(ctx, "acme", "", nil); res[0].EnvValue() != "ghp_three" {
		t.Errorf("an env secret's variable holds %q", res[0].EnvValue())
	}
	req.Value = []byte("ghp_four")
	if again := set(t, f.vault, req); again.Placeholder == "" || again.Placeholder == first.Placeholder {
		t.Errorf("placeholder after env then proxy: %q", again.Placeholder)
	}
}

// Delete removes a secret, and the hook tells of every change.
func TestDeleteAndOnChange(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	changes := 0
	f.vault.OnChange(func() {
		changes++
		if _, err := f.vault.Plaintexts(ctx); err != nil { // the hook may read the vault
			t.Error(err)
		}
	})
	set(t, f.vault, secrets.SetRequest{Workspace: "acme", Name: "A", Value: []byte("a")})
	set(t, f.vault, secrets.SetRequest{Workspace: "acme", User: "u-1", Name: "A", Value: []byte("ua")})
	if err := f.vault.Delete(ctx, "acme", "u-1", "A"); err != nil {
		t.Fatal(err)
	}
	if err := f.vault.Delete(ctx, "acme", "u-1", "A"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Delete of a deleted secret: %v, want not found", err)
	}
	if got, _ := values(t, f.vault, "acme", "u-1", nil); got["A"] != "a (workspace)" {
		t.Errorf("after deleting the user's own: %v", got)
	}
	if err := f.vault.RotateMaster(ctx); err != nil {
		t.Fatal(err)
	}
	if changes != 4 {
		t.Errorf("OnChange called %d times, want 4 (two sets, a delete, a rotation)", changes)
	}
	plain, err := f.vault.Plaintexts(ctx)
	if err != nil || len(plain) != 1 || plain[0].Value != "a" {
		t.Errorf("Plaintexts = %v, %v", plain, err)
	}
}

// No value is in the database's files, only sealed.
func TestAtRest(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const value = "sk-live-8c1f0e5b-very-secret"
	set(t, f.vault, secrets.SetRequest{Workspace: "acme", Name: "STRIPE_KEY", Value: []byte(value)})
	set(t, f.vault, secrets.SetRequest{Workspace: "acme", User: "u-1", Name: "PROXIED", Value: []byte(value), Inject: "proxy", Hosts: []string{"api.stripe.com"}})

	// The WAL before a checkpoint, then every file after a close.
	look := func(when string) {
		t.Helper()
		found := false
		for _, p := range []string{f.dbPath, f.dbPath + "-wal"} {
			b, err := os.ReadFile(p)
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(b, []byte(value)) {
				t.Errorf("%s: %s holds the value", when, filepath.Base(p))
			}
			found = found || bytes.Contains(b, []byte("STRIPE_KEY"))
		}
		if !found {
			t.Fatalf("%s: the secret's name is in no file: the test reads the wrong ones", when)
		}
	}
	look("before a checkpoint")
	if err := f.db.Close(); err != nil {
		t.Fatal(err)
	}
	look("after a close")
}

// A sealed value moved to another secret's row, or a row edited to send
// a proxy secret elsewhere, does not open.
func TestSealedIsBound(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                   string
		workspace, user, label string
		hosts                  []string
	}{
		{"another name", "acme", "", "OTHER", nil},
		{"another workspace", "evil", "", "TOKEN", nil},
		{"a user's own", "acme", "u-1", "TOKEN", nil},
		{"other hosts", "acme", "", "TOKEN", []string{"evil.example"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			ctx := t.Context()
			set(t, f.vault, secrets.SetRequest{Workspace: "acme", Name: "TOKEN", Value: []byte("v"), Inject: "proxy", Hosts: []string{"api.example.com"}})
			rec, err := f.db.GetSecret(ctx, "acme", "", "TOKEN")
			if err != nil {
				t.Fatal(err)
			}
			rec.Workspace, rec.User, rec.Name = tc.workspace, tc.user, tc.label
			if tc.hosts != nil {
				rec.Hosts = tc.hosts
			}
			if err := f.db.PutSecret(ctx, rec); err != nil {
				t.Fatal(err)
			}
			_, err = f.vault.Resolve(ctx, tc.workspace, tc.user, []string{tc.label})
			if err == nil || !strings.Contains(err.Error(), "does not open") {
				t.Fatalf("Resolve of a moved value: %v, want an error that it does not open", err)
			}
			if _, err := f.vault.Plaintexts(ctx); err == nil {
				t.Fatal("Plaintexts opened a moved value")
			}
		})
	}
}
