package secrets_test

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/storage/store/sqlite"
	"github.com/hutchdev/hutch/internal/trust/secrets"
)

func keyText(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

func writeFile(t *testing.T, path, text string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // past the umask
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func openDB(t *testing.T, dir string) *sqlite.DB {
	t.Helper()
	db, err := sqlite.Open(t.Context(), filepath.Join(dir, "hutch.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// seed sets secrets of both scopes, two workspaces and both injections,
// and returns what Resolve gives each (workspace, user) for them.
func seed(t *testing.T, v *secrets.Vault) map[[2]string]map[string]string {
	t.Helper()
	for _, r := range []secrets.SetRequest{
		{Workspace: "acme", Name: "A", Value: []byte("ws-a")},
		{Workspace: "acme", User: "u-1", Name: "A", Value: []byte("u1-a")},
		{Workspace: "acme", Name: "P", Value: []byte("proxied"), Inject: "proxy", Hosts: []string{"api.example.com"}},
		{Workspace: "other", Name: "A", Value: []byte("other-a")},
	} {
		set(t, v, r)
	}
	return map[[2]string]map[string]string{
		{"acme", ""}:    {"A": "ws-a (workspace)", "P": "proxied (workspace)"},
		{"acme", "u-1"}: {"A": "u1-a (user)", "P": "proxied (workspace)"},
		{"other", ""}:   {"A": "other-a (workspace)"},
	}
}

// intact checks that v opens every secret seed set, as it was.
func intact(t *testing.T, v *secrets.Vault, want map[[2]string]map[string]string) {
	t.Helper()
	for who, w := range want {
		got, err := values(t, v, who[0], who[1], nil)
		if err != nil || !reflect.DeepEqual(got, w) {
			t.Errorf("Resolve for %v = %v, %v; want %v", who, got, err, w)
		}
	}
}

// Where the key comes from, and what is refused there.
func TestKeySource(t *testing.T) {
	t.Parallel()
	good := keyText(32)
	for _, tc := range []struct {
		name string
		// prepare makes what the case needs in dir and returns its source.
		prepare func(t *testing.T, dir string) secrets.KeySource
		kind    error  // nil: Open succeeds
		want    string // in the error
	}{
		{"made on first start", func(t *testing.T, dir string) secrets.KeySource {
			return secrets.KeySource{File: filepath.Join(dir, "secrets.key"), Create: true}
		}, nil, ""},
		{"the operator's, read-only", func(t *testing.T, dir string) secrets.KeySource {
			writeFile(t, filepath.Join(dir, "k"), good+"\n", 0o400)
			return secrets.KeySource{File: filepath.Join(dir, "k")}
		}, nil, ""},
		{"absent, not to be made", func(t *testing.T, dir string) secrets.KeySource {
			return secrets.KeySource{File: filepath.Join(dir, "k")}
		}, errdefs.ErrFailedPrecondition, "/k does not exist"},
		{"readable by others", func(t *testing.T, dir string) secrets.KeySource {
			writeFile(t, filepath.Join(dir, "k"), good, 0o644)
			return secrets.KeySource{File: filepath.Join(dir, "k"), Create: true}
		}, errdefs.ErrFailedPrecondition, "(mode 0644): refused; make it its owner's alone (chmod 600"},
		{"readable by the group", func(t *testing.T, dir string) secrets.KeySource {
			writeFile(t, filepath.Join(dir, "k"), good, 0o640)
			return secrets.KeySource{File: filepath.Join(dir, "k")}
		}, errdefs.ErrFailedPrecondition, "mode 0640"},
		{"not base64", func(t *testing.T, dir string) secrets.KeySource {
			writeFile(t, filepath.Join(dir, "k"), "correct horse battery staple", 0o600)
			return secrets.KeySource{File: filepath.Join(dir, "k")}
		}, errdefs.ErrFailedPrecondition, "does not hold a master key"},
		{"too short", func(t *testing.T, dir string) secrets.KeySource {
			writeFile(t, filepath.Join(dir, "k"), keyText(16), 0o600)
			return secrets.KeySource{File: filepath.Join(dir, "k")}
		}, errdefs.ErrFailedPrecondition, "want 32 random bytes in standard base64"},
		{"a directory", func(t *testing.T, dir string) secrets.KeySource {
			if err := os.Mkdir(filepath.Join(dir, "k"), 0o700); err != nil {
				t.Fatal(err)
			}
			return secrets.KeySource{File: filepath.Join(dir, "k")}
		}, errdefs.ErrFailedPrecondition, "not a regular file"},
		{"the environment, over a file", func(t *testing.T, dir string) secrets.KeySource {
			writeFile(t, filepath.Join(dir, "k"), "not read at all", 0o644)
			return secrets.KeySource{File: filepath.Join(dir, "k"), Env: good}
		}, nil, ""},
		{"the environment, not a key", func(t *testing.T, dir string) secrets.KeySource {
			return secrets.KeySource{File: filepath.Join(dir, "k"), Create: true, Env: "hunter2"}
		}, errdefs.ErrFailedPrecondition, "the environment variable HUTCH_MASTER_KEY does not hold a master key"},
		{"none", func(t *testing.T, dir string) secrets.KeySource { return secrets.KeySource{} },
			errdefs.ErrInvalidArgument, "name a key file, or give the key in HUTCH_MASTER_KEY"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			db := openDB(t, dir)
			src := tc.prepare(t, dir)
			v, err := secrets.Open(t.Context(), db, src, nil)
			if tc.kind != nil {
				if !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("Open: %v, want %v saying %q", err, tc.kind, tc.want)
				}
				for _, secret := range []string{good, "hunter2", "correct horse"} {
					if strings.Contains(err.Error(), secret) {
						t.Errorf("the error holds the key's text: %v", err)
					}
				}
				if check, _ := db.VaultCheck(t.Context()); check != nil {
					t.Error("a refused Open sealed a key check")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			set(t, v, secrets.SetRequest{Workspace: "acme", Name: "A", Value: []byte("a")})
			if src.Create {
				fi, err := os.Stat(src.File)
				if err != nil || fi.Mode().Perm() != 0o600 {
					t.Fatalf("key file made: %v, %v; want mode 0600", fi, err)
				}
				if text := readFile(t, src.File); !regexp.MustCompile(`^[A-Za-z0-9+/]{43}=\n$`).MatchString(text) {
					t.Errorf("key file made holds %d bytes, not a key in base64 and a newline", len(text))
				}
			}
			if src.Env != "" {
				err := v.RotateMaster(t.Context())
				if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "HUTCH_MASTER_KEY, which hutch cannot rewrite") {
					t.Errorf("RotateMaster of a key from the environment: %v", err)
				}
				if got, err := values(t, v, "acme", "", nil); err != nil || got["A"] != "a (workspace)" {
					t.Errorf("after a refused rotation: %v, %v", got, err)
				}
			}
		})
	}
}

// A wrong key, or none where secrets were sealed, is refused at Open,
// which says so and changes nothing: the right key opens everything after.
func TestWrongKey(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	want := seed(t, f.vault)
	before, err := f.db.ListSecrets(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	check, _ := f.db.VaultCheck(ctx)
	right := readFile(t, f.src.File)
	other := keyText(32)
	otherFile := filepath.Join(f.dir, "other.key")
	writeFile(t, otherFile, other, 0o600)

	for _, tc := range []struct {
		name    string
		prepare func(t *testing.T)
		src     secrets.KeySource
		want    string
	}{
		{"another key file", func(t *testing.T) {}, secrets.KeySource{File: otherFile},
			"the master key from the key file " + otherFile + " does not match the one this data dir's secrets were sealed with; nothing was changed"},
		{"another key in the environment", func(t *testing.T) {}, secrets.KeySource{File: f.src.File, Env: other},
			"the master key from the environment variable HUTCH_MASTER_KEY does not match"},
		{"the key file lost", func(t *testing.T) {
			if err := os.Remove(f.src.File); err != nil {
				t.Fatal(err)
			}
		}, f.src, "master key file " + f.src.File + " does not exist, but this data dir holds secrets"},
	} {
		// Not parallel: the cases share the data dir and put it back.
		tc.prepare(t)
		_, err := secrets.Open(ctx, f.db, tc.src, nil)
		if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Open: %v\nwant a failed precondition saying %q", tc.name, err, tc.want)
		}
		if err != nil && (strings.Contains(err.Error(), other) || strings.Contains(err.Error(), strings.TrimSpace(right))) {
			t.Errorf("%s: the error holds a key", tc.name)
		}
		after, _ := f.db.ListSecrets(ctx, "")
		afterCheck, _ := f.db.VaultCheck(ctx)
		if !reflect.DeepEqual(after, before) || string(afterCheck) != string(check) {
			t.Errorf("%s: a refused Open changed the store", tc.name)
		}
		if _, err := os.Stat(f.src.File); err != nil {
			writeFile(t, f.src.File, right, 0o600) // put back
		} else if readFile(t, f.src.File) != right || readFile(t, otherFile) != other {
			t.Errorf("%s: a refused Open changed a key file", tc.name)
		}
	}
	intact(t, f.open(t, f.src), want)
}

// A rotation reseals every secret under a new key, which replaces the old
// one in the key file; the old key opens the data dir no more.
func TestRotateMaster(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	want := seed(t, f.vault)
	old := readFile(t, f.src.File)
	before, _ := f.db.ListSecrets(ctx, "")
	placeholders, _ := f.vault.ListAll(ctx, "")

	for round := range 2 {
		if err := f.vault.RotateMaster(ctx); err != nil {
			t.Fatalf("rotation %d: %v", round, err)
		}
		intact(t, f.vault, want)
	}
	if now := readFile(t, f.src.File); now == old || len(now) != len(old) {
		t.Errorf("the key file after rotations: %d bytes, the same: %v", len(now), now == old)
	}
	if _, err := os.Stat(f.src.File + ".new"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a rotation left its next key: %v", err)
	}
	after, _ := f.db.ListSecrets(ctx, "")
	for i, s := range after {
		b := before[i]
		if string(s.Sealed) == string(b.Sealed) || !s.UpdatedAt.Equal(b.UpdatedAt) || s.Placeholder != b.Placeholder {
			t.Errorf("%s/%s/%s after rotations: resealed %v, times or placeholder changed", s.Workspace, s.User, s.Name, string(s.Sealed) != string(b.Sealed))
		}
	}
	if list, _ := f.vault.ListAll(ctx, ""); !reflect.DeepEqual(list, placeholders) {
		t.Errorf("a rotation changed what is listed:\n%+v\n%+v", list, placeholders)
	}

	_, err := secrets.Open(ctx, f.db, secrets.KeySource{Env: strings.TrimSpace(old)}, nil)
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("Open with the old key: %v, want refused", err)
	}
	reopened := f.open(t, f.src)
	intact(t, reopened, want)
	set(t, reopened, secrets.SetRequest{Workspace: "acme", Name: "LATER", Value: []byte("later")})
	if got, err := values(t, reopened, "acme", "", []string{"LATER"}); err != nil || got["LATER"] != "later (workspace)" {
		t.Errorf("a secret set after the rotation: %v, %v", got, err)
	}
}

// A rotation that a crash stopped at any step is ended by the next Open,
// and no secret is lost.
func TestRotationRecovery(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// crash leaves the data dir as a rotation stopped there would; it
		// returns the key file's text to expect after Open.
		crash func(t *testing.T, f *fixture) string
	}{
		{"before the transaction", func(t *testing.T, f *fixture) string {
			writeFile(t, f.src.File+".new", keyText(32)+"\n", 0o600)
			return readFile(t, f.src.File)
		}},
		{"after the transaction, before the rename", func(t *testing.T, f *fixture) string {
			old := readFile(t, f.src.File)
			if err := f.vault.RotateMaster(t.Context()); err != nil {
				t.Fatal(err)
			}
			next := readFile(t, f.src.File)
			writeFile(t, f.src.File+".new", next, 0o600)
			writeFile(t, f.src.File, old, 0o600)
			return next
		}},
		{"after the transaction, the key file gone", func(t *testing.T, f *fixture) string {
			if err := f.vault.RotateMaster(t.Context()); err != nil {
				t.Fatal(err)
			}
			next := readFile(t, f.src.File)
			if err := os.Rename(f.src.File, f.src.File+".new"); err != nil {
				t.Fatal(err)
			}
			return next
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			want := seed(t, f.vault)
			key := tc.crash(t, f)
			v := f.open(t, f.src)
			intact(t, v, want)
			if got := readFile(t, f.src.File); got != key {
				t.Error("the key file after Open is not the key the secrets are sealed under")
			}
			if _, err := os.Stat(f.src.File + ".new"); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("Open left the next key: %v", err)
			}
			if err := v.RotateMaster(t.Context()); err != nil {
				t.Fatal(err)
			}
			intact(t, f.open(t, f.src), want)
		})
	}
}
