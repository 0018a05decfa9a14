package oci

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/runtime/agentclient"
	"github.com/hutchdev/hutch/internal/runtime/backend"
	"github.com/hutchdev/hutch/internal/runtime/disk"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
)

// Moving a suspended sandbox between two nodes, each a Runtime with state,
// sandboxes, networks and disks of its own and the same template root, as
// the nodes of a scale-out have the same templates.

// moveNode is one node.
type moveNode struct {
	dir string
	cfg Config
	r   *Runtime
}

// moveNodes makes two nodes of runtime cfg in a temporary directory, and
// the spec of a sandbox on the host template for either.
func moveNodes(t *testing.T, cfg Config) (spec backend.Spec, a, b *moveNode) {
	base, err := os.MkdirTemp("", "hutch-move-")
	if err != nil {
		t.Fatal(err)
	}
	// runc reaches the sandboxes' roots from inside their user
	// namespaces, as a stranger: the way there must be open.
	if err := os.Chmod(base, 0o711); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if mounts := mustMountsUnder(t, base); len(mounts) > 0 {
			t.Errorf("mounts left under %s, not removed:\n%s", base, strings.Join(mounts, "\n"))
			return
		}
		if err := os.RemoveAll(base); err != nil {
			t.Error(err)
		}
	})
	cfg.AgentExe = buildAgent(t)
	templates, err := rootfs.Open(filepath.Join(base, "templates"))
	if err != nil {
		t.Fatal(err)
	}
	host, err := templates.Get("host")
	if err != nil {
		t.Fatal(err)
	}
	node := func(name string) *moveNode {
		n := &moveNode{dir: filepath.Join(base, name), cfg: cfg}
		if err := os.Mkdir(n.dir, 0o711); err != nil { // open on the way, as base
			t.Fatal(err)
		}
		n.cfg.StateRoot = filepath.Join(n.dir, "state")
		n.cfg.SandboxDir = filepath.Join(n.dir, "sandboxes")
		n.cfg.NetnsDir = filepath.Join(n.dir, "netns")
		disks, err := disk.NewPool(filepath.Join(n.dir, "disks"), 256, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		n.cfg.Disks = disks
		n.r = New(n.cfg)
		return n
	}
	a, b = node("a"), node("b")
	spec = backend.Spec{
		ID:       randomID(t),
		RootDir:  host.RootDir,
		Binds:    host.Binds,
		Files:    map[string]backend.File{"/etc/hutch-spec-file": {Data: []byte("from the spec\n"), Mode: 0o644}},
		Limits:   backend.Limits{CPUs: 1, MemoryBytes: 256 << 20, Pids: 128, DiskBytes: 256 << 20},
		Hostname: "moving",
	}
	return spec, a, b
}

// randomID returns a new sandbox ID.
func randomID(t *testing.T) string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// assertNothingLeft checks that node n has nothing of the sandboxes ids
// left: files, mounts, loop devices, containers, cgroups, processes and
// id range claims (see assertGone).
func (n *moveNode) assertNothingLeft(t *testing.T, ids ...string) {
	t.Helper()
	assertGone(t, n.cfg, n.dir, ids)
	if claims := claimsUnder(n.dir); len(claims) > 0 {
		t.Errorf("id ranges still claimed: %v", claims)
	}
}

// claimsUnder lists the id range claims of sandbox directories under dir.
func claimsUnder(dir string) []string {
	entries, _ := os.ReadDir(DefaultIDRegistry)
	var out []string
	for _, e := range entries {
		if target, err := os.Readlink(filepath.Join(DefaultIDRegistry, e.Name())); err == nil && strings.HasPrefix(target, dir+"/") {
			out = append(out, e.Name()+" → "+target)
		}
	}
	return out
}

// agentOf returns a client of sandbox h's agent on node n.
func (n *moveNode) agentOf(t *testing.T, h backend.Handle) *agentclient.Client {
	c := agentclient.New(func(ctx context.Context) (net.Conn, error) { return n.r.DialAgent(ctx, h) })
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// sh runs script with /bin/sh -c as user ("" for the sandbox's user) and
// fails the test unless it exits 0.
func sh(t *testing.T, c *agentclient.Client, user, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	exe, err := c.Start(ctx, agentclient.Command{Argv: []string{"/bin/sh", "-c", script}, User: user})
	if err != nil {
		t.Fatalf("start %q: %v", script, err)
	}
	defer func() { _ = exe.Close() }()
	var stdout, stderr strings.Builder
	for {
		ev, err := exe.Recv()
		if err != nil {
			t.Fatalf("%q: %v", script, err)
		}
		switch {
		case ev.Exit != nil:
			if ev.Exit.Code != 0 {
				t.Fatalf("%q exited %d: %s", script, ev.Exit.Code, stderr.String())
			}
			return stdout.String()
		case ev.Stream == agentclient.Stdout:
			stdout.Write(ev.Data)
		default:
			stderr.Write(ev.Data)
		}
	}
}

// The files a sandbox made, and how they look inside it, as a listing that
// must be the same after the move.
const (
	makeFiles = `set -e
		cd /home/user
		echo plain > plain && chown 1000:1000 plain
		ln plain hard
		ln -s plain sym
		rm /etc/issue
		rm -rf /etc/profile.d && mkdir /etc/profile.d && echo new > /etc/profile.d/new.sh
		cp /bin/true /srv/suid && chmod 4755 /srv/suid
		mkdir /srv/shared && chown 1000:1000 /srv/shared && chmod 3775 /srv/shared
		touch -d @1234567890 /srv/old
		mkfifo /srv/fifo
		dd if=/dev/zero of=/srv/sparse bs=1M count=0 seek=8 2>/dev/null && echo end >> /srv/sparse
		head -c 2097152 /dev/urandom > /srv/random
		sync`
	makeUserFiles = `echo mine > ~/mine && mkdir ~/dir && echo deep > ~/dir/deep && sync`
	listFiles     = `cd /home/user
		stat -c '%n %u:%g %a %h %F %s %Y' plain hard sym mine dir dir/deep /srv/suid /srv/shared /srv/old /srv/fifo /srv/sparse /srv/random
		[ plain -ef hard ] && echo plain and hard are one file
		readlink sym; cat plain mine dir/deep /etc/hutch-spec-file
		[ -e /etc/issue ] && echo /etc/issue is there || echo /etc/issue is gone
		ls -A /etc/profile.d
		sha256sum /srv/random`
)

func TestMoveRunc(t *testing.T) {
	requireRoot(t)
	if _, err := exec.LookPath("runc"); err != nil {
		t.Skip("runc is not installed: apt-get install runc (./setup does)")
	}
	spec, a, b := moveNodes(t, RuncConfig("runc"))
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()

	h, err := a.r.Create(ctx, spec)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	destroyedOnA := false
	t.Cleanup(func() {
		if !destroyedOnA {
			_ = a.r.Destroy(context.Background(), h)
		}
	})
	agent := a.agentOf(t, h)
	sh(t, agent, "root", makeFiles)
	sh(t, agent, "", makeUserFiles)
	before := sh(t, agent, "root", listFiles)
	for _, want := range []string{"mine 1000:1000 644 1 regular file", "/srv/suid 0:0 4755", "/srv/shared 1000:1000 3775", "/srv/old 0:0 644 1 regular empty file 0 1234567890", "/etc/issue is gone\nnew.sh\n"} {
		if !strings.Contains(before, want) {
			t.Fatalf("the files made in the sandbox: no %q in\n%s", want, before)
		}
	}

	var discard bytes.Buffer
	if _, err := a.r.ExportSuspended(ctx, h, &discard, nil); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("ExportSuspended of a running sandbox: %v, want ErrFailedPrecondition", err)
	}
	if _, err := a.r.ExportSuspended(ctx, backend.Handle{ID: "nosuchsandbox"}, &discard, nil); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("ExportSuspended of no sandbox: %v, want ErrNotFound", err)
	}
	if err := a.r.Suspend(ctx, h, true); err != nil {
		t.Fatalf("Suspend: %v", err)
	}
	var layer, memory bytes.Buffer
	began := time.Now()
	kept, err := a.r.ExportSuspended(ctx, h, &layer, &memory)
	if err != nil {
		t.Fatalf("ExportSuspended: %v", err)
	}
	exported := time.Since(began)
	if kept || memory.Len() > 0 {
		t.Errorf("runc kept memory: %v, %d bytes", kept, memory.Len())
	}
	t.Logf("layer: %d KiB exported in %v", layer.Len()>>10, exported.Round(time.Millisecond))

	// The other node imports it while the first still has it: each has
	// a range of its own, and the owners must follow.
	if b.r.Has(spec.ID) {
		t.Fatal("node b has the sandbox before the import")
	}
	began = time.Now()
	hb, err := b.r.ImportSuspended(ctx, spec, bytes.NewReader(layer.Bytes()), nil)
	if err != nil {
		t.Fatalf("ImportSuspended: %v", err)
	}
	t.Logf("layer: imported in %v", time.Since(began).Round(time.Millisecond))
	t.Cleanup(func() { _ = b.r.Destroy(context.Background(), hb) })
	if !b.r.Has(spec.ID) {
		t.Error("node b does not have the sandbox it imported")
	}
	idsA, _ := mappingOf(a.r.dir(spec.ID))
	idsB, okB := mappingOf(b.r.dir(spec.ID))
	if !okB || idsA == idsB {
		t.Fatalf("id ranges: node a %d, node b %d (%v): want two", idsA.base, idsB.base, okB)
	}
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(b.r.layout(spec.ID).upper, "home/user/mine"), &st); err != nil || int(st.Uid) != idsB.host(1000) {
		t.Errorf("owner of ~/mine on node b: %d (%v), want %d", st.Uid, err, idsB.host(1000))
	}

	// The first node is lost.
	if err := a.r.Destroy(ctx, h); err != nil {
		t.Fatalf("Destroy on node a: %v", err)
	}
	destroyedOnA = true
	if a.r.Has(spec.ID) {
		t.Error("node a still has the sandbox it destroyed")
	}
	if err := b.r.Resume(ctx, hb, spec); err != nil {
		t.Fatalf("Resume on node b: %v", err)
	}
	agent = b.agentOf(t, hb)
	if after := sh(t, agent, "root", listFiles); after != before {
		t.Errorf("after the move:\n%s\nbefore:\n%s", after, before)
	}
	if du := sh(t, agent, "root", "du -k /srv/sparse | cut -f1"); strings.TrimSpace(du) != "4" {
		t.Errorf("/srv/sparse holds %s KiB after the move, want 4: holes stay holes", strings.TrimSpace(du))
	}
	// Writable still, and as the user.
	sh(t, agent, "", "echo more >> ~/mine && rm ~/dir/deep && touch /srv/shared/x")

	if err := b.r.Destroy(ctx, hb); err != nil {
		t.Fatalf("Destroy on node b: %v", err)
	}
	a.assertNothingLeft(t, spec.ID)
	b.assertNothingLeft(t, spec.ID)
}

func TestMoveGvisor(t *testing.T) {
	requireRoot(t)
	runsc := findRunsc()
	if runsc == "" {
		t.Skip("gVisor's runsc is neither in bin/ nor in PATH: make runsc (./setup does)")
	}
	spec, a, b := moveNodes(t, GvisorConfig(runsc))
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()

	h, err := a.r.Create(ctx, spec)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { _ = a.r.Destroy(context.Background(), h) })
	agent := a.agentOf(t, h)
	// A shell holding a value in its memory only, which it writes out on
	// SIGUSR1, and counting on. The count is written aside and renamed
	// into place, so that a read never finds it truncated and not yet
	// written.
	sh(t, agent, "", `echo kept > ~/note
		sh -c 'v=$$-$(date +%N); trap "echo \$v > ~/said" USR1; echo "$v" > ~/value; i=0; while :; do i=$((i+1)); echo $i > ~/count.new; mv -f ~/count.new ~/count; sleep 0.1; done' >/dev/null 2>&1 &
		echo $! > ~/holder; while [ ! -s ~/count ]; do sleep 0.01; done`)
	time.Sleep(500 * time.Millisecond)
	if err := a.r.Suspend(ctx, h, true); err != nil {
		t.Fatalf("Suspend: %v", err)
	}
	var layer, memory bytes.Buffer
	began := time.Now()
	kept, err := a.r.ExportSuspended(ctx, h, &layer, &memory)
	if err != nil {
		t.Fatalf("ExportSuspended: %v", err)
	}
	if !kept {
		t.Fatal("ExportSuspended of a sandbox suspended with its memory kept none")
	}
	t.Logf("layer %d KiB and memory %d KiB exported in %v", layer.Len()>>10, memory.Len()>>10, time.Since(began).Round(time.Millisecond))
	if err := a.r.Destroy(ctx, h); err != nil {
		t.Fatalf("Destroy on node a: %v", err)
	}

	began = time.Now()
	hb, err := b.r.ImportSuspended(ctx, spec, bytes.NewReader(layer.Bytes()), bytes.NewReader(memory.Bytes()))
	if err != nil {
		t.Fatalf("ImportSuspended: %v", err)
	}
	imported := time.Since(began)
	t.Cleanup(func() { _ = b.r.Destroy(context.Background(), hb) })
	began = time.Now()
	if err := b.r.Resume(ctx, hb, spec); err != nil {
		t.Fatalf("Resume on node b: %v", err)
	}
	t.Logf("imported in %v, restored in %v", imported.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
	if _, err := os.Stat(b.r.layout(spec.ID).checkpoint()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the memory image is still there after the restore: %v", err)
	}
	agent = b.agentOf(t, hb)
	out := sh(t, agent, "", `cat ~/note /etc/hutch-spec-file; c=$(cat ~/count)
		tr '\0' ' ' < /proc/$(cat ~/holder)/cmdline | cut -c1-5
		kill -USR1 $(cat ~/holder); i=0; while [ ! -s ~/said ] && [ $i -lt 500 ]; do sleep 0.01; i=$((i+1)); done
		sleep 0.5; echo "$c $(cat ~/count)"; cat ~/said ~/value`)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 6 || lines[0] != "kept" || lines[1] != "from the spec" || lines[2] != "sh -c" {
		t.Fatalf("after the move: %q, want the files, and the holder (pid from before) still a shell", out)
	}
	var c1, c2 int
	if _, err := fmt.Sscan(lines[3], &c1, &c2); err != nil || c1 < 3 || c2 <= c1 {
		t.Errorf("the count after the move: %q, want one going on from where it was (3 or more)", lines[3])
	}
	if lines[4] == "" || lines[4] != lines[5] {
		t.Errorf("the value held in memory across the move: said %q, stored %q", lines[4], lines[5])
	}

	if err := b.r.Destroy(ctx, hb); err != nil {
		t.Fatalf("Destroy on node b: %v", err)
	}
	a.assertNothingLeft(t, spec.ID)
	b.assertNothingLeft(t, spec.ID)
}

// An archive that is not what ExportSuspended writes is refused, and the
// import leaves nothing: neither on the node nor where its names point.
func TestImportRefusesHostileLayers(t *testing.T) {
	requireRoot(t)
	if _, err := exec.LookPath("runc"); err != nil {
		t.Skip("runc is not installed: apt-get install runc (./setup does)")
	}
	spec, _, n := moveNodes(t, RuncConfig("runc"))
	outside := filepath.Join(filepath.Dir(n.dir), "outside")
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	up := strings.Repeat("../", 40) + strings.TrimPrefix(outside, "/")
	dir := func(name string) *tar.Header {
		return &tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o755}
	}
	file := func(name string) *tar.Header {
		return &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: 3}
	}
	symlink := func(name, to string) *tar.Header {
		return &tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: to}
	}
	tests := []struct {
		name    string
		entries []*tar.Header
		raw     []byte // instead of entries
	}{
		{name: "dot-dot", entries: []*tar.Header{dir("./"), file(up + "/escaped")}},
		{name: "dot-dot inside", entries: []*tar.Header{dir("./"), dir("a/"), file("a/../../escaped")}},
		{name: "absolute", entries: []*tar.Header{dir("./"), file(outside + "/escaped")}},
		{name: "through a symlink", entries: []*tar.Header{dir("./"), symlink("out", outside), file("out/escaped")}},
		{name: "through a relative symlink", entries: []*tar.Header{dir("./"), symlink("up", up), file("up/escaped")}},
		{name: "symlink as a directory", entries: []*tar.Header{dir("./"), symlink("d", outside), dir("d/sub/")}},
		{name: "hard link out", entries: []*tar.Header{dir("./"), {Typeflag: tar.TypeLink, Name: "passwd", Linkname: "../../../../../../../etc/passwd"}}},
		{name: "hard link to a host file", entries: []*tar.Header{dir("./"), {Typeflag: tar.TypeLink, Name: "passwd", Linkname: "/etc/passwd"}}},
		{name: "hard link through a symlink", entries: []*tar.Header{dir("./"), symlink("etc", "/etc"), {Typeflag: tar.TypeLink, Name: "passwd", Linkname: "etc/passwd"}}},
		{name: "block device", entries: []*tar.Header{dir("./"), {Typeflag: tar.TypeBlock, Name: "sda", Mode: 0o666, Devmajor: 8}}},
		{name: "char device", entries: []*tar.Header{dir("./"), {Typeflag: tar.TypeChar, Name: "mem", Mode: 0o666, Devmajor: 1, Devminor: 1}}},
		{name: "owner outside the range", entries: []*tar.Header{dir("./"), {Typeflag: tar.TypeReg, Name: "x", Mode: 0o4755, Uid: 70000, Size: 3}}},
		{name: "twice", entries: []*tar.Header{dir("./"), file("x"), file("x")}},
		{name: "top not a directory", entries: []*tar.Header{file(".")}},
		{name: "redirect", entries: []*tar.Header{dir("./"), {Typeflag: tar.TypeDir, Name: "etc/", Mode: 0o755, PAXRecords: map[string]string{paxXattr + "trusted.overlay.redirect": "/root"}}}},
		{name: "not a tar", raw: bytes.Repeat([]byte("hutch "), 200)},
		{name: "cut short", raw: func() []byte {
			b := tarOf(t, []*tar.Header{dir("./"), {Typeflag: tar.TypeReg, Name: "big", Mode: 0o644, Size: 8192}})
			return b[:2048]
		}()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			archive := tc.raw
			if archive == nil {
				archive = tarOf(t, tc.entries)
			}
			s := spec
			s.ID = randomID(t)
			h, err := n.r.ImportSuspended(t.Context(), s, bytes.NewReader(archive), nil)
			if err == nil {
				_ = n.r.Destroy(context.Background(), h)
				t.Fatal("ImportSuspended took it")
			}
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("ImportSuspended: %v, want ErrInvalidArgument", err)
			}
			t.Logf("refused: %v", err)
			if n.r.Has(s.ID) {
				t.Error("the node has the sandbox after a failed import")
			}
			if entries, _ := os.ReadDir(outside); len(entries) > 0 {
				t.Errorf("the archive wrote outside its layer: %v", entries)
			}
			n.assertNothingLeft(t, s.ID)
		})
	}
}

// tarOf writes entries (regular files with Size bytes of "abc…") as a tar.
func tarOf(t *testing.T, entries []*tar.Header) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, hdr := range entries {
		if hdr.PAXRecords != nil {
			hdr.Format = tar.FormatPAX
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if hdr.Typeflag == tar.TypeReg {
			if _, err := tw.Write(bytes.Repeat([]byte("a"), int(hdr.Size))); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// The layer archive alone, on plain directories: what an upper directory
// can hold goes from one id range to another, and comes out the same.
func TestMoveLayerArchive(t *testing.T) {
	requireRoot(t)
	from, to := owners{ids: idMapping{base: idBase + 7*idRange}, mapped: true}, owners{ids: idMapping{base: idBase + 9*idRange}, mapped: true}
	src, dst := filepath.Join(t.TempDir(), "upper"), filepath.Join(t.TempDir(), "upper")
	for _, d := range []string{src, dst} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(d, from.ids.host(0), from.ids.host(0)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Lchown(dst, to.ids.host(0), to.ids.host(0)); err != nil {
		t.Fatal(err)
	}
	mustDo := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	at := func(rel string) string { return filepath.Join(src, rel) }
	mustDo(os.MkdirAll(at("etc/opaque"), 0o755))
	mustDo(unix.Lsetxattr(at("etc/opaque"), "trusted.overlay.opaque", []byte("y"), 0))
	mustDo(os.WriteFile(at("etc/opaque/new"), []byte("new\n"), 0o640))
	mustDo(unix.Mknod(at("etc/gone"), unix.S_IFCHR, 0))
	mustDo(os.WriteFile(at("file"), []byte("data"), 0o644))
	mustDo(os.Link(at("file"), at("etc/link")))
	mustDo(os.Symlink("../file", at("etc/sym")))
	mustDo(unix.Mkfifo(at("fifo"), 0o620))
	mustDo(os.WriteFile(at("suid"), []byte("#!/bin/sh\n"), 0o755))
	mustDo(os.Chmod(at("suid"), 0o4755|os.ModeSetuid))
	mustDo(os.Mkdir(at("sticky"), 0o755))
	mustDo(os.Chmod(at("sticky"), os.ModeSticky|os.ModeSetgid|0o777))
	sparse, err := os.Create(at("sparse"))
	mustDo(err)
	_, err = sparse.WriteAt([]byte("end"), 16<<20)
	mustDo(err)
	mustDo(sparse.Close())
	for _, rel := range []string{"etc", "etc/opaque", "etc/opaque/new", "etc/sym", "file", "fifo", "suid", "sticky", "sparse"} {
		mustDo(os.Lchown(at(rel), from.ids.host(1000), from.ids.host(100)))
	}
	// After the chown, which clears file capabilities.
	mustDo(unix.Lsetxattr(at("file"), "user.note", []byte("a note"), 0))
	mustDo(unix.Lsetxattr(at("file"), "security.capability", capV3(1<<10, from.ids.host(0)), 0))
	mustDo(unix.Lsetxattr(at("file"), "trusted.other", []byte("dropped"), 0))
	mustDo(os.Chmod(at("suid"), 0o4755|os.ModeSetuid)) // the chown cleared it
	mustDo(os.Chmod(at("sticky"), os.ModeSticky|os.ModeSetgid|0o777))
	old := time.Unix(1234567890, 123456789)
	for _, rel := range []string{"etc/opaque/new", "etc/sym", "etc/opaque", "etc", "."} {
		mustDo(unix.UtimesNanoAt(unix.AT_FDCWD, at(rel), []unix.Timespec{unix.NsecToTimespec(old.UnixNano()), unix.NsecToTimespec(old.UnixNano())}, unix.AT_SYMLINK_NOFOLLOW))
	}

	var archive bytes.Buffer
	if err := writeLayer(t.Context(), &archive, src, from); err != nil {
		t.Fatalf("writeLayer: %v", err)
	}
	if err := readLayer(t.Context(), bytes.NewReader(archive.Bytes()), dst, to); err != nil {
		t.Fatalf("readLayer: %v", err)
	}
	want, got := describeTree(t, src, from), describeTree(t, dst, to)
	// What does not move: xattrs of no writable layer's.
	want = strings.ReplaceAll(want, " trusted.other=dropped", "")
	if got != want {
		t.Errorf("moved layer:\n%s\nwant:\n%s", got, want)
	}
	for _, line := range []string{"etc/gone char 0:0", "etc/opaque dir", "trusted.overlay.opaque=y", "security.capability=v3 root 0", "sticky dir 1000:100 3777", "suid reg 1000:100 4755", "etc/opaque/new reg 1000:100 640 1234567890.123456789"} {
		if !strings.Contains(got, line) {
			t.Errorf("moved layer has no %q:\n%s", line, got)
		}
	}
	var st unix.Stat_t
	mustDo(unix.Lstat(filepath.Join(dst, "sparse"), &st))
	if st.Blocks*512 > 64<<10 {
		t.Errorf("the sparse file takes %d KiB after the move", st.Blocks/2)
	}
}

// capV3 is a v3 file capability with permitted set perm for the user
// namespace whose root is host id root.
func capV3(perm uint32, root int) []byte {
	v := make([]byte, capV3Size)
	binary.LittleEndian.PutUint32(v, capRevision3|1)
	binary.LittleEndian.PutUint32(v[4:], perm)
	binary.LittleEndian.PutUint32(v[capRootIDFrom:], uint32(root))
	return v
}

// describeTree lists what is under root as the sandbox of o sees it: one
// line per entry with its type, owner, mode, mtime, size, content, link
// and xattrs, hard links by the first name of their file.
func describeTree(t *testing.T, root string, o owners) string {
	var lines []string
	first := map[uint64]string{}
	err := filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		kind := map[uint32]string{unix.S_IFDIR: "dir", unix.S_IFREG: "reg", unix.S_IFLNK: "symlink", unix.S_IFCHR: "char", unix.S_IFIFO: "fifo"}[st.Mode&unix.S_IFMT]
		uid, _ := o.own(st.Uid)
		gid, _ := o.own(st.Gid)
		if kind == "char" {
			uid, gid = int(st.Uid), int(st.Gid)
		}
		line := fmt.Sprintf("%s %s %d:%d %o %d.%09d", rel, kind, uid, gid, st.Mode&0o7777, st.Mtim.Sec, st.Mtim.Nsec)
		switch kind {
		case "reg":
			if f, ok := first[st.Ino]; ok {
				line += " = " + f
				break
			}
			first[st.Ino] = rel
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			line += fmt.Sprintf(" %d %x", len(b), sha256.Sum256(b))
		case "symlink":
			dest, _ := os.Readlink(p)
			line += " → " + dest
		case "char":
			line += fmt.Sprintf(" %d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev))
		}
		names, err := listXattrs(p)
		if err != nil {
			return err
		}
		slices.Sort(names)
		for _, name := range names {
			v, err := getXattr(p, name)
			if err != nil {
				return err
			}
			if name == capXattr && len(v) == capV3Size {
				if root, ok := o.own(binary.LittleEndian.Uint32(v[capRootIDFrom:])); ok {
					line += fmt.Sprintf(" %s=v3 root %d", name, root)
				} else {
					line += fmt.Sprintf(" %s=v3 root outside the range", name)
				}
				continue
			}
			line += fmt.Sprintf(" %s=%s", name, v)
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// A layer larger than the disk of the sandbox it is imported into is
// refused as such, and leaves nothing.
func TestImportLayerLargerThanItsDisk(t *testing.T) {
	requireRoot(t)
	if _, err := exec.LookPath("runc"); err != nil {
		t.Skip("runc is not installed: apt-get install runc (./setup does)")
	}
	spec, _, n := moveNodes(t, RuncConfig("runc"))
	spec.Limits.DiskBytes = 16 << 20
	archive := tarOf(t, []*tar.Header{{Typeflag: tar.TypeDir, Name: "./", Mode: 0o755}, {Typeflag: tar.TypeReg, Name: "big", Mode: 0o644, Size: 32 << 20}})
	_, err := n.r.ImportSuspended(t.Context(), spec, bytes.NewReader(archive), nil)
	if !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Fatalf("ImportSuspended of a layer of 32 MiB into a disk of 16: %v, want ErrResourceExhausted", err)
	}
	t.Logf("refused: %v", err)
	n.assertNothingLeft(t, spec.ID)
}

// A memory image is untrusted as a layer is: files and directories alone,
// beneath its directory, within the limit.
func TestImportRefusesHostileMemoryImages(t *testing.T) {
	base := t.TempDir()
	outside := filepath.Join(base, "outside")
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := &tar.Header{Typeflag: tar.TypeDir, Name: "./", Mode: 0o700}
	headerOnly := func(hdr *tar.Header) []byte {
		var buf bytes.Buffer
		if err := tar.NewWriter(&buf).WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes() // the header: the size alone is refused
	}
	tests := []struct {
		name    string
		archive []byte
		kind    error
	}{
		{"dot-dot", tarOf(t, []*tar.Header{dir, {Typeflag: tar.TypeReg, Name: "../outside/escaped", Size: 3}}), errdefs.ErrInvalidArgument},
		{"symlink", tarOf(t, []*tar.Header{dir, {Typeflag: tar.TypeSymlink, Name: "out", Linkname: outside}}), errdefs.ErrInvalidArgument},
		{"global header", tarOf(t, []*tar.Header{dir, {Typeflag: tar.TypeXGlobalHeader, Name: "g", PAXRecords: map[string]string{"comment": "x"}}}), errdefs.ErrInvalidArgument},
		{"device", tarOf(t, []*tar.Header{dir, {Typeflag: tar.TypeChar, Name: "null", Devmajor: 1, Devminor: 3}}), errdefs.ErrInvalidArgument},
		{"too large", headerOnly(&tar.Header{Typeflag: tar.TypeReg, Name: "pages.img", Mode: 0o600, Size: 1 << 40}), errdefs.ErrTooLarge},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			image := filepath.Join(base, "image"+strconv.Itoa(i))
			err := readImage(t.Context(), bytes.NewReader(tc.archive), image, imageLimit(backend.Limits{MemoryBytes: 256 << 20}))
			if !errors.Is(err, tc.kind) {
				t.Errorf("readImage: %v, want %v", err, tc.kind)
			}
			t.Logf("refused: %v", err)
			if entries, _ := os.ReadDir(outside); len(entries) > 0 {
				t.Errorf("the archive wrote outside its directory: %v", entries)
			}
			if fi, err := os.Stat(image); err != nil || fi.Mode().Perm() != 0o700 {
				t.Errorf("the image directory: %v, %v; want one of mode 0700", fi, err)
			}
		})
	}
}
