package rootfs

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"golang.org/x/sys/unix"
)

// Attacks on the tenant key → host boundary through template builds
// (docs/security.md): a build is the tenant's code, its root what that
// code left, and the daemon's own steps run as host root. Each test here
// failed before its fix.
//
// The builds use a stand-in debootstrap (a shell script that records its
// arguments and makes a small root) and a stand-in Runner (Go code in
// place of a sandbox, playing what a tenant's npm postinstall script
// would do), so they need no network and no runtime; the store chowns,
// so they need root.

// fakeDebootstrap is a debootstrap that records its arguments in
// dir/args, makes a root with the account files, and, when run without
// --foreign (which would run the packages' scripts), leaves
// dir/scripts-ran-on-host.
const fakeDebootstrap = `#!/bin/sh
printf '%s\n' "$@" > "$HUTCH_TEST_DIR/args"
n=$#; i=0
for a; do i=$((i+1)); [ $i -eq $((n-1)) ] && target=$a; done
mkdir -p "$target/etc" "$target/var/cache/apt/archives/partial" "$target/var/lib/apt/lists" "$target/usr/lib/python3.11" "$target/tmp" "$target/debootstrap"
printf 'root:x:0:0:\n' > "$target/etc/group"
touch "$target/usr/lib/python3.11/EXTERNALLY-MANAGED"
case " $* " in
*" --foreign "*) ;;
*) printf 'root:x:0:0:root:/root:/bin/bash\n' > "$target/etc/passwd"; touch "$HUTCH_TEST_DIR/scripts-ran-on-host" ;;
esac
`

// attackBuild is a stand-in build's setting.
type attackBuild struct {
	dir   string   // the stand-in debootstrap's record
	cache string   // the package cache
	steps []string // the Runner's steps, in order
	// mirror, when set, is the archive's URL instead of one that answers
	// nothing; keep builds with Keep.
	mirror string
	keep   bool
}

// newAttackBuild makes the stand-in debootstrap and its scripts: bookworm
// with a keyring the host has, kali-rolling with one it lacks.
func newAttackBuild(t *testing.T) *attackBuild {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the store chowns: needs root")
	}
	a := &attackBuild{dir: t.TempDir(), cache: t.TempDir()}
	scripts := filepath.Join(a.dir, "share", "scripts")
	keyring := filepath.Join(a.dir, "debian-archive-keyring.gpg")
	for path, body := range map[string]string{
		filepath.Join(a.dir, "debootstrap"):    fakeDebootstrap,
		keyring:                                "a keyring",
		filepath.Join(scripts, "bookworm"):     "mirror_style release\nkeyring " + keyring + "\n",
		filepath.Join(scripts, "kali-rolling"): "mirror_style release\nkeyring /usr/share/keyrings/hutch-test-absent-keyring.gpg\n",
	} {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("HUTCH_TEST_DIR", a.dir)
	t.Setenv("DEBOOTSTRAP_DIR", filepath.Join(a.dir, "share"))
	return a
}

// build builds name from suite; plant, if not nil, runs as the npm step
// (the tenant's postinstall scripts) on the root.
func (a *attackBuild) build(t *testing.T, s *Store, name, suite string, plant func(root string)) (Info, error) {
	t.Helper()
	run := func(ctx context.Context, root string, step RunStep) error {
		script := strings.Join(step.Argv, " ")
		a.steps = append(a.steps, script)
		switch {
		case strings.Contains(script, "--second-stage"):
			// base-passwd's scripts write the account files.
			return os.WriteFile(filepath.Join(root, "etc/passwd"), []byte("root:x:0:0:root:/root:/bin/bash\n"), 0o644)
		case strings.Contains(script, "apt-get"):
			return os.WriteFile(filepath.Join(root, "var/cache/apt/archives/jq_1.6-2.1_amd64.deb"), []byte("checked by apt"), 0o644)
		case strings.Contains(script, "npm install") && plant != nil:
			plant(root)
		}
		return nil
	}
	mirror := a.mirror
	if mirror == "" {
		mirror = "http://127.0.0.1:1/debian"
	}
	return s.BuildDebian(context.Background(), name, DebianOptions{
		Suite: suite, Mirror: mirror, Packages: []string{"jq", "npm"}, NpmPackages: []string{"left-pad"},
		CacheDir: a.cache, Debootstrap: filepath.Join(a.dir, "debootstrap"), LocalCAs: a.dir + "/cas", Keep: a.keep, Run: run,
	}, nil)
}

// args is what the stand-in debootstrap was given; nil if it never ran.
func (a *attackBuild) args(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(a.dir, "args"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

// A suite whose archive keyring the host lacks was built unchecked:
// debootstrap only warns, and the tenant's mirror serves what it likes.
// Now it is refused before debootstrap runs, and a suite whose keyring the
// host has is checked against it, a missing signature stopping the build.
func TestAttackBuildUnsignedSuite(t *testing.T) {
	a := newAttackBuild(t)
	s := openStore(t)
	_, err := a.build(t, s, "kali", "kali-rolling", nil)
	if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "keyring") {
		t.Errorf("build of a suite without its keyring: %v, want an invalid argument naming the keyring", err)
	}
	if args := a.args(t); args != nil {
		t.Errorf("debootstrap ran for a suite without its keyring: %q", args)
	}
	assertNoBuilds(t, s)

	if _, err := a.build(t, s, "signed", "bookworm", nil); err != nil {
		t.Fatal(err)
	}
	args := a.args(t)
	keyring := "--keyring=" + filepath.Join(a.dir, "debian-archive-keyring.gpg")
	if !slices.Contains(args, keyring) || !slices.Contains(args, "--force-check-gpg") {
		t.Errorf("debootstrap's arguments: %q, want %s and --force-check-gpg", args, keyring)
	}
}

// The packages' maintainer scripts ran in debootstrap's chroot as host
// root. Now debootstrap only unpacks on the host (--foreign), and its
// second stage runs through the build's Runner, in a sandbox.
func TestAttackBuildScriptsOnHost(t *testing.T) {
	a := newAttackBuild(t)
	s := openStore(t)
	if _, err := a.build(t, s, "base", "bookworm", nil); err != nil {
		t.Fatal(err)
	}
	if args := a.args(t); !slices.Contains(args, "--foreign") {
		t.Errorf("debootstrap's arguments: %q, want --foreign", args)
	}
	if _, err := os.Stat(filepath.Join(a.dir, "scripts-ran-on-host")); err == nil {
		t.Error("the packages' scripts ran on the host")
	}
	if len(a.steps) == 0 || !strings.Contains(a.steps[0], "/debootstrap/debootstrap --second-stage") {
		t.Errorf("the build's sandboxed steps: %q, want debootstrap's second stage first", a.steps)
	}
}

// The daemon's steps after npm (whose postinstall scripts are the
// tenant's) followed the links those scripts planted: a host file was
// overwritten (api.key, after which every token the daemon derives from
// it is forgeable) or removed. Now they work beneath the root, never
// through a link; the build may fail, the host's files stay.
func TestAttackHostStepSymlink(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plant func(t *testing.T, root, host string)
	}{
		{"chromium setting over api.key", func(t *testing.T, root, host string) {
			mkdir(t, filepath.Join(root, "etc/chromium.d"))
			symlink(t, filepath.Join(host, "api.key"), filepath.Join(root, "etc/chromium.d/hutch-no-sandbox"))
		}},
		{"chromium directory on the host", func(t *testing.T, root, host string) {
			symlink(t, host, filepath.Join(root, "etc/chromium.d"))
		}},
		{"python directory on the host", func(t *testing.T, root, host string) {
			symlink(t, host, filepath.Join(root, "usr/lib/python3.99"))
		}},
		{"apt's partial downloads on the host", func(t *testing.T, root, host string) {
			rmAll(t, filepath.Join(root, "var/cache/apt/archives/partial"))
			symlink(t, host, filepath.Join(root, "var/cache/apt/archives/partial"))
		}},
		{"apt's lists on the host", func(t *testing.T, root, host string) {
			rmAll(t, filepath.Join(root, "var/lib/apt/lists"))
			symlink(t, host, filepath.Join(root, "var/lib/apt/lists"))
		}},
		{"npm's cache on the host", func(t *testing.T, root, host string) {
			rmAll(t, filepath.Join(root, "tmp"))
			symlink(t, host, filepath.Join(root, "tmp"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newAttackBuild(t)
			s := openStore(t)
			host := t.TempDir() // the daemon's data dir
			want := map[string]string{
				"api.key":             "the daemon's key",
				"EXTERNALLY-MANAGED":  "a host file",
				"x_y":                 "a host file",
				"precious.deb":        "a host file",
				".hutch-npm/keep.txt": "a host file",
			}
			for name, body := range want {
				mkdir(t, filepath.Dir(filepath.Join(host, name)))
				if err := os.WriteFile(filepath.Join(host, name), []byte(body), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			_, err := a.build(t, s, "planted", "bookworm", func(root string) { tc.plant(t, root, host) })
			t.Logf("build: %v", err)
			for name, body := range want {
				if b, err := os.ReadFile(filepath.Join(host, name)); err != nil || string(b) != body {
					t.Errorf("host file %s: %q, %v; want it untouched", name, b, err)
				}
			}
			if entries, _ := os.ReadDir(host); len(entries) != len(want) {
				var names []string
				for _, e := range entries {
					names = append(names, e.Name())
				}
				t.Errorf("the host directory holds %q, want only its own files", names)
			}
		})
	}
}

// The shared package cache took every .deb the build's root had at its
// end, a file a tenant's npm postinstall script wrote among them, and
// linked it into every later build of every workspace. Now it takes what
// apt-get downloaded (and checked against the signed index) before any of
// the build's own code runs.
func TestAttackAptCachePoison(t *testing.T) {
	a := newAttackBuild(t)
	s := openStore(t)
	_, err := a.build(t, s, "poison", "bookworm", func(root string) {
		for _, name := range []string{"libc6_2.36-9_amd64.deb", "jq_1.6-2.1_amd64.deb"} {
			if err := os.WriteFile(filepath.Join(root, "var/cache/apt/archives", name), []byte("planted"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(a.cache, "libc6_2.36-9_amd64.deb")); err == nil {
		t.Error("a package the build's own code wrote is in the shared cache")
	}
	if b, err := os.ReadFile(filepath.Join(a.cache, "jq_1.6-2.1_amd64.deb")); err != nil || string(b) != "checked by apt" {
		t.Errorf("the cached jq: %q, %v; want what apt-get downloaded", b, err)
	}
}

// An image registry's error answer came back whole in the build's error:
// with a pull from a workspace's key, a way to read what a server on the
// daemon's networks says. Now the status and error codes only.
func TestAttackImagePullErrorBody(t *testing.T) {
	s := openStore(t)
	const secret = "internal-secret-9f2c"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte("metadata: " + secret))
	}))
	t.Cleanup(srv.Close)
	_, err := s.PullImage(context.Background(), "leak", strings.TrimPrefix(srv.URL, "http://")+"/app:1", 0, nil)
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Errorf("pull from a registry answering 500: %v, want an error without its body", err)
	}
	if !strings.Contains(err.Error(), "500") {
		t.Errorf("pull from a registry answering 500: %v, want the status", err)
	}
}

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func rmAll(t *testing.T, path string) {
	t.Helper()
	if err := os.RemoveAll(path); err != nil {
		t.Fatal(err)
	}
}

// A kept build is the root a build's own code left (npm's install scripts,
// here planting links out of the root and a FIFO), archived and unpacked
// again by host root. The unpacking stays inside the new root: the links
// come back as links, nothing is written through them, and the host file
// they name is untouched.
func TestAttackKeptBuildUnpacksInside(t *testing.T) {
	a := newAttackBuild(t)
	archive := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/debian/dists/bookworm/InRelease":
			_, _ = w.Write([]byte("Suite: bookworm\n"))
		case "/left-pad":
			_, _ = w.Write([]byte(`{"dist-tags":{"latest":"1.3.0"}}`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(archive.Close)
	was := npmRegistryURL
	npmRegistryURL = archive.URL
	t.Cleanup(func() { npmRegistryURL = was })
	a.mirror, a.keep = archive.URL+"/debian", true

	host := filepath.Join(t.TempDir(), "host-file")
	if err := os.WriteFile(host, []byte("the host's"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := openStore(t)
	plant := func(root string) {
		modules := filepath.Join(root, "usr/local/lib/node_modules/evil")
		if err := os.MkdirAll(modules, 0o755); err != nil {
			t.Fatal(err)
		}
		for link, target := range map[string]string{"escape": "/", "host-file": host, "up": "../../../../../../../.."} {
			if err := os.Symlink(target, filepath.Join(modules, link)); err != nil {
				t.Fatal(err)
			}
		}
		if err := unix.Mkfifo(filepath.Join(modules, "fifo"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.build(t, s, "base", "bookworm", plant); err != nil {
		t.Fatalf("first build: %v", err)
	}
	kept, _ := filepath.Glob(filepath.Join(a.cache, "builds", "base-*.tar"))
	if len(kept) != 1 {
		t.Fatalf("kept builds: %v, want one", kept)
	}
	if fi, err := os.Stat(kept[0]); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("kept build %s: %v %v, want 0600: it holds the root's setuid files", kept[0], fi.Mode(), err)
	}
	if fi, err := os.Stat(filepath.Dir(kept[0])); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("kept builds' dir: %v %v, want 0700", fi.Mode(), err)
	}
	a.steps = nil
	info, err := a.build(t, s, "base", "bookworm", nil)
	if err != nil {
		t.Fatalf("build from the kept one: %v", err)
	}
	if len(a.steps) != 0 {
		t.Errorf("steps run for a kept build: %q, want none", a.steps)
	}
	tmpl, err := s.Version("base", info.Version)
	if err != nil {
		t.Fatal(err)
	}
	modules := filepath.Join(tmpl.RootDir, "usr/local/lib/node_modules/evil")
	for link, target := range map[string]string{"escape": "/", "host-file": host, "up": "../../../../../../../.."} {
		if got, err := os.Readlink(filepath.Join(modules, link)); err != nil || got != target {
			t.Errorf("%s in the unpacked root: %q, %v; want the link to %s, as planted", link, got, err, target)
		}
	}
	if fi, err := os.Lstat(filepath.Join(modules, "fifo")); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("fifo in the unpacked root: %v %v", fi, err)
	}
	if b, err := os.ReadFile(host); err != nil || string(b) != "the host's" {
		t.Errorf("the host file the root links to: %q, %v; want it untouched", b, err)
	}
}
