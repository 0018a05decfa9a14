package rootfs

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/storage/rootfs/imagetest"
)

// The helpers' short names here.
type tarEntry = imagetest.Entry

var (
	layer = imagetest.Layer
	image = imagetest.Image
)

// testImage has two layers: the second deletes a file of the first (a
// whiteout) and adds one.
func testImage(t *testing.T) v1.Image {
	return image(t,
		layer(t,
			tarEntry{Name: "etc/", Type: tar.TypeDir, Mode: 0o755},
			tarEntry{Name: "etc/passwd", Body: "root:x:0:0:root:/root:/bin/sh\n"},
			tarEntry{Name: "etc/group", Body: "root:x:0:\n"},
			tarEntry{Name: "bin/hello", Body: "#!/bin/sh\necho hello\n", Mode: 0o755},
			tarEntry{Name: "bin/hello-again", Type: tar.TypeLink, Link: "bin/hello"},
			tarEntry{Name: "lib", Type: tar.TypeSymlink, Link: "usr/lib"},
			tarEntry{Name: "a/old", Body: "old"},
		),
		layer(t,
			tarEntry{Name: "a/.wh.old", Body: ""},
			tarEntry{Name: "a/new", Body: "new"},
		),
	)
}

// serveRegistry runs an in-process registry on loopback.
func serveRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func push(t *testing.T, img v1.Image, ref string) {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatal(err)
	}
}

func TestPullImage(t *testing.T) {
	s := openStore(t)
	ref := serveRegistry(t) + "/test/hello:v1"
	push(t, testImage(t), ref)

	var steps []string
	info, err := s.PullImage(context.Background(), "hello", ref, 0, func(p Progress) { steps = append(steps, p.Step) })
	if err != nil {
		t.Fatal(err)
	}
	if info.Source != SourceImage || info.Image != ref || !strings.HasPrefix(info.Digest, "sha256:") {
		t.Errorf("info = %+v", info)
	}
	if strings.Join(steps, " ") != "pull extract finish" {
		t.Errorf("steps: %v", steps)
	}
	tmpl, err := s.Get("hello")
	if err != nil {
		t.Fatal(err)
	}
	root := tmpl.RootDir
	fi, err := os.Stat(filepath.Join(root, "bin/hello"))
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("bin/hello: %v, %v", fi, err)
	}
	again, err := os.Stat(filepath.Join(root, "bin/hello-again"))
	if err != nil || !os.SameFile(fi, again) {
		t.Errorf("bin/hello-again is not a hard link of bin/hello: %v", err)
	}
	if dest, err := os.Readlink(filepath.Join(root, "lib")); err != nil || dest != "usr/lib" {
		t.Errorf("lib -> %q, %v", dest, err)
	}
	if _, err := os.Lstat(filepath.Join(root, "a/old")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a/old, deleted by the second layer: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "a/new")); err != nil || string(b) != "new" {
		t.Errorf("a/new: %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "etc/passwd")); err != nil || !strings.Contains(string(b), "\nuser:x:1000:1000:") {
		t.Errorf("etc/passwd has no sandbox user: %q, %v", b, err)
	}
	for _, p := range []string{"home/user/workspace", ".hutch/hutch", "etc/hosts", "etc/hostname", "tmp"} {
		if _, err := os.Lstat(filepath.Join(root, p)); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	assertNoBuilds(t, s)
}

func TestPullImageFailures(t *testing.T) {
	s := openStore(t)
	reg := serveRegistry(t)
	ctx := context.Background()
	for _, ref := range []string{reg + "/test/missing:v1", "Not A Reference", reg + "/test/missing@sha256:0000"} {
		if _, err := s.PullImage(ctx, "bad", ref, 0, nil); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("PullImage(%q): %v, want an invalid argument", ref, err)
		}
	}
	if _, err := s.Get("bad"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Get after failed pulls: %v, want not found", err)
	}
	assertNoBuilds(t, s)
}

// An image is untrusted: nothing it holds writes outside the root. (go-
// containerregistry's Extract drops some such entries already; untar does
// not count on it.)
func TestImageCannotEscape(t *testing.T) {
	s := openStore(t)
	outside := t.TempDir()
	victim := filepath.Join(outside, "passwd")
	if err := os.WriteFile(victim, []byte("host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tarOf := func(entries ...tarEntry) io.Reader {
		rc, err := layer(t, entries...).Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		return rc
	}
	for i, tc := range []struct {
		entries []tarEntry
		refused bool
	}{
		// A file through a symbolic link to a host directory.
		{[]tarEntry{{Name: "out", Type: tar.TypeSymlink, Link: outside}, {Name: "out/planted", Body: "x"}}, true},
		// A hard link to a host file.
		{[]tarEntry{{Name: "stolen", Type: tar.TypeLink, Link: "../../../../../../.." + victim}}, true},
		// Names with .. stay inside.
		{[]tarEntry{{Name: "../../dots", Body: "in"}, {Name: "/abs", Body: "in"}}, false},
	} {
		root := filepath.Join(t.TempDir(), "root")
		if err := os.Mkdir(root, 0o755); err != nil {
			t.Fatal(err)
		}
		err := untar(tarOf(tc.entries...), root, nil)
		if tc.refused != (err != nil) {
			t.Errorf("case %d: untar: %v, want refused %v", i, err, tc.refused)
		}
		if !tc.refused {
			for _, f := range []string{"dots", "abs"} {
				if b, err := os.ReadFile(filepath.Join(root, f)); err != nil || string(b) != "in" {
					t.Errorf("case %d: %s did not land in the root: %q, %v", i, f, b, err)
				}
			}
		}
	}
	if _, err := os.Lstat(filepath.Join(outside, "planted")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a file was planted outside the root: %v", err)
	}

	// The account file the sandbox user is added to, a link to a host
	// file: refused, the host file untouched.
	ref := serveRegistry(t) + "/test/evil:v1"
	push(t, image(t, layer(t, tarEntry{Name: "etc/passwd", Type: tar.TypeSymlink, Link: victim})), ref)
	if _, err := s.PullImage(context.Background(), "evil", ref, 0, nil); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("an image whose /etc/passwd links to a host file: %v, want an invalid argument", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "host\n" {
		t.Errorf("the host file was changed: %q", b)
	}
	assertNoBuilds(t, s)
}

func TestImportArchive(t *testing.T) {
	s := openStore(t)
	dir := t.TempDir()
	img := testImage(t)
	ctx := context.Background()

	docker := filepath.Join(dir, "docker.tar")
	tag, _ := name.NewTag("hutch.test/hello:v1")
	if err := tarball.WriteToFile(docker, tag, img); err != nil {
		t.Fatal(err)
	}
	// An OCI layout, packed in a tar.
	lay := filepath.Join(dir, "layout")
	p, err := layout.Write(lay, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img, layout.WithPlatform(v1.Platform{OS: "linux", Architecture: "amd64"})); err != nil {
		t.Fatal(err)
	}
	oci := filepath.Join(dir, "oci.tar")
	if out, err := exec.Command("tar", "-C", lay, "-cf", oci, ".").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v %s", err, out)
	}
	for _, archive := range []string{docker, oci} {
		info, err := s.ImportArchive(ctx, "imported", archive, 0, nil)
		if err != nil {
			t.Fatalf("ImportArchive(%s): %v", filepath.Base(archive), err)
		}
		tmpl, _ := s.Get("imported")
		if b, err := os.ReadFile(filepath.Join(tmpl.RootDir, "a/new")); err != nil || string(b) != "new" || info.Image != "archive" {
			t.Errorf("%s: a/new %q, %v; info %+v", filepath.Base(archive), b, err, info)
		}
	}

	junk := filepath.Join(dir, "junk.tar")
	if err := os.WriteFile(junk, []byte("not a tar at all, not even close"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.tar")
	if out, err := exec.Command("tar", "-C", t.TempDir(), "-cf", empty, ".").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v %s", err, out)
	}
	for _, bad := range []string{junk, empty} {
		if _, err := s.ImportArchive(ctx, "bad", bad, 0, nil); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("ImportArchive(%s): %v, want an invalid argument", filepath.Base(bad), err)
		}
	}
	if _, err := s.Get("bad"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Get after failed imports: %v", err)
	}
	assertNoBuilds(t, s)
}

// A full disk is a clear error and keeps nothing: the store on a small
// file system of the test's own.
func TestImportImageNoDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a small file system needs root")
	}
	dir := t.TempDir()
	mnt := filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=4m"); err != nil {
		t.Fatalf("mount a 4 MiB tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(mnt, 0); err != nil {
			t.Errorf("unmount: %v", err)
		}
	})
	s, err := Open(filepath.Join(mnt, "templates"))
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("0123456789abcdef", 512<<10/16) // 512 KiB
	var entries []tarEntry
	for i := range 16 {
		entries = append(entries, tarEntry{Name: "big/" + string(rune('a'+i)), Body: big})
	}
	ref := serveRegistry(t) + "/test/big:v1"
	push(t, image(t, layer(t, entries...)), ref)
	_, err = s.PullImage(context.Background(), "big", ref, 0, nil)
	if !errors.Is(err, errdefs.ErrResourceExhausted) || !strings.Contains(err.Error(), "disk is full") {
		t.Fatalf("pull onto a full disk: %v, want resource exhausted", err)
	}
	if _, err := s.Get("big"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Get after a failed pull: %v", err)
	}
	assertNoBuilds(t, s)
}

// maxBytes bounds what a pull or an import unpacks: the first entry that
// would pass it stops the build with resource exhausted, and nothing is
// left; many empty files are not free; an upload past it stops too. The
// same image within the bound is made.
func TestImageBudget(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	zeros := strings.Repeat("\x00", 1<<20)
	var big, many []tarEntry
	for i := range 8 {
		big = append(big, tarEntry{Name: fmt.Sprintf("big/%d", i), Body: zeros})
	}
	for i := range 4096 {
		many = append(many, tarEntry{Name: fmt.Sprintf("many/%d", i)})
	}
	registry := serveRegistry(t)
	for what, entries := range map[string][]tarEntry{"big": big, "many": many} {
		img := image(t, layer(t, entries...))
		ref := registry + "/test/" + what + ":v1"
		push(t, img, ref)
		oci := ociArchive(t, img)
		for how, build := range map[string]func(maxBytes int64) (Info, error){
			"pull":   func(maxBytes int64) (Info, error) { return s.PullImage(ctx, what, ref, maxBytes, nil) },
			"import": func(maxBytes int64) (Info, error) { return s.ImportArchive(ctx, what, oci, maxBytes, nil) },
		} {
			if info, err := build(1 << 20); !errors.Is(err, errdefs.ErrResourceExhausted) || !strings.Contains(err.Error(), "unpacks to more than 1 MiB") {
				t.Errorf("%s of %s within 1 MiB: %+v, %v; want resource exhausted", how, what, info, err)
			}
			if _, err := s.Get(what); !errors.Is(err, errdefs.ErrNotFound) {
				t.Errorf("%s of %s: the template is there after the refusal: %v", how, what, err)
			}
			assertNoBuilds(t, s)
			if _, err := build(64 << 20); err != nil {
				t.Errorf("%s of %s within 64 MiB: %v", how, what, err)
			}
			if err := s.Remove(what); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		size, max int64
		ok        bool
	}{{1 << 20, 1 << 20, true}, {1<<20 + 1, 1 << 20, false}, {8 << 20, 0, true}} {
		path, cleanup, err := s.Upload(io.LimitReader(zeroReader{}, tc.size), tc.max)
		if tc.ok != (err == nil) || (!tc.ok && !errors.Is(err, errdefs.ErrResourceExhausted)) {
			t.Errorf("upload of %d bytes within %d: %v", tc.size, tc.max, err)
		}
		cleanup()
		if path != "" {
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the upload is left after its cleanup: %v", err)
			}
		}
	}
	assertNoBuilds(t, s)
	if left, _ := filepath.Glob(filepath.Join(s.dir, ".build-upload-*")); len(left) > 0 {
		t.Errorf("uploads left: %v", left)
	}
}

// ociArchive is img as an OCI layout packed in a tar.
func ociArchive(t *testing.T, img v1.Image) string {
	t.Helper()
	dir := t.TempDir()
	p, err := layout.Write(filepath.Join(dir, "layout"), empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img, layout.WithPlatform(v1.Platform{OS: "linux", Architecture: "amd64"})); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "oci.tar")
	if b, err := exec.Command("tar", "-C", filepath.Join(dir, "layout"), "-cf", out, ".").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v %s", err, b)
	}
	return out
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }
