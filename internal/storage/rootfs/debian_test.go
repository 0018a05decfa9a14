package rootfs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// transcript is what debootstrap --debian-installer wrote on descriptor 3
// in a real build (shortened): phases, their progress, info and an error.
const transcript = `I: ARCHEXEC
IF: Target architecture can be executed
P: 0 100 DOWNREL
PF: Downloading Release file
I: RETRIEVING
IA: InRelease
IA: 
IF: Retrieving %s %s
P: 33 100
P: 100 100 DOWNREL
PF: Downloading Release file
P: 1 88 EXTRACTPKGS
PF: Extracting packages
I: EXTRACTING
IA: libc6
IF: Extracting %s...
P: 14 88 EXTRACTPKGS
PF: Extracting packages
I: UNPACKING
IA: coreutils
IF: Unpacking %s...
P: 3 10 CONFBASE
PF: Configuring base system
E: LEFTOVERDEBS
EA: nosuchpkg
EF: Couldn't find these debs: %s
`

func TestInstallerProtocol(t *testing.T) {
	var got []Progress
	p := newInstallerParser(func(pr Progress) { got = append(got, pr) })
	p.read(strings.NewReader(transcript))
	want := []Progress{
		{Step: "archexec", Message: "Target architecture can be executed"},
		{Step: "index", Done: 0, Total: 100, Message: "Downloading Release file"},
		{Step: "index", Done: 0, Total: 100, Message: "Retrieving InRelease"},
		{Step: "index", Done: 33, Total: 100, Message: "Retrieving InRelease"},
		{Step: "index", Done: 100, Total: 100, Message: "Retrieving InRelease"},
		{Step: "extract", Done: 1, Total: 88, Message: "Extracting packages"},
		{Step: "extract", Done: 1, Total: 88, Message: "Extracting libc6..."},
		{Step: "extract", Done: 14, Total: 88, Message: "Extracting libc6..."},
		{Step: "extract", Done: 14, Total: 88, Message: "Unpacking coreutils..."},
		{Step: "configure", Done: 3, Total: 10, Message: "Configuring base system"},
	}
	// The first info line comes before any phase.
	want[0].Step = "start"
	if len(got) != len(want) {
		t.Fatalf("got %d progress calls, want %d:\n%+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("progress %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if p.err != "Couldn't find these debs: nosuchpkg" {
		t.Errorf("error = %q", p.err)
	}
}

func TestMirrorIn(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"one-line", "# comment\ndeb http://mirror.example/debian bookworm main\n", "http://mirror.example/debian"},
		{"one-line with options", "deb [arch=amd64 signed-by=/k.gpg] https://m.example/debian bookworm main\n", "https://m.example/debian"},
		{"one-line other suite first", "deb http://security.example/ bookworm-security main\ndeb http://m.example/debian bookworm main\n", "http://m.example/debian"},
		{"sources only", "deb-src http://m.example/debian bookworm main\n", ""},
		{"deb822", "Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm bookworm-updates\nComponents: main\n\nTypes: deb\nURIs: http://deb.debian.org/debian-security\nSuites: bookworm-security\n", "http://deb.debian.org/debian"},
		{"deb822 security only", "Types: deb\nURIs: http://deb.debian.org/debian-security\nSuites: bookworm-security\n", ""},
		{"deb822 no blank line at the end", "Types: deb deb-src\nURIs: http://m.example/d\nSuites: bookworm", "http://m.example/d"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mirrorIn(tc.text, "bookworm"); got != tc.want {
				t.Errorf("mirrorIn = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestFormat(t *testing.T) {
	for _, tc := range []struct {
		f    string
		args []string
		want string
	}{
		{"Retrieving %s %s", []string{"Packages", ""}, "Retrieving Packages"},
		{"100%% of %s", []string{"it"}, "100% of it"},
		{"missing %s", nil, "missing"},
	} {
		if got := format(tc.f, tc.args); got != tc.want {
			t.Errorf("format(%q, %q) = %q, want %q", tc.f, tc.args, got, tc.want)
		}
	}
}

func TestBuildDebianRejectsBadInput(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		opts DebianOptions
	}{
		{"-rf", DebianOptions{}},
		{"ok", DebianOptions{Packages: []string{"--root=/"}}},
		{"ok", DebianOptions{Suite: "bookworm; rm", Mirror: "http://m.example/"}},
		{"ok", DebianOptions{Suite: "bookworm", Mirror: "ftp://m.example/"}},
		{"ok", DebianOptions{Suite: "bookworm", Mirror: "file:/srv/mirror"}},
		{"ok", DebianOptions{NpmPackages: []string{"deno"}}},
		{"ok", DebianOptions{NpmPackages: []string{"--global"}, Packages: []string{"npm"}}},
	} {
		_, err := s.BuildDebian(ctx, tc.name, tc.opts, nil)
		if !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("BuildDebian(%q, %+v) = %v, want an invalid argument", tc.name, tc.opts, err)
		}
	}
	assertNoBuilds(t, s)
}

// needDebootstrap skips a test that builds from Debian where it cannot.
func needDebootstrap(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("debootstrap needs root")
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		t.Skip("debootstrap is not installed (./setup installs it)")
	}
}

// chrootRun stands in for a build's sandbox in these tests: it runs step
// in a chroot of root, as root of the host, which the daemon never does
// (its Runner is internal/core/template' runBuildStep). Enough for
// debootstrap's second stage, whose packages come from Debian.
func chrootRun(ctx context.Context, root string, step RunStep) error {
	// #nosec G204 -- the test's own steps
	cmd := exec.CommandContext(ctx, "chroot", append([]string{root}, step.Argv...)...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	for k, v := range step.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return err
	}
	var last []string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if step.Output != nil {
			step.Output(sc.Text())
		}
		last = append(last[max(0, len(last)-9):], sc.Text())
	}
	if err := cmd.Wait(); err != nil {
		return errdefs.InvalidArgument("the command failed (%v): %s", err, strings.Join(last, "\n"))
	}
	return nil
}

// packageCache is where these tests' builds keep the Debian packages they
// download, across runs, as a host's builds do in its data dir: a build
// downloads only what the last one did not (builds sharing it take turns
// at debootstrap, so the tests run in parallel).
func packageCache(t *testing.T) string {
	t.Helper()
	const dir = "/var/cache/hutch-test/debs"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestBuildDebian builds the smallest template from the host's mirror: the
// base system, with debootstrap, which it keeps; then again from what it
// kept. (Packages are installed by apt-get in a sandbox: the e2e tests build
// with them.)
func TestBuildDebian(t *testing.T) {
	t.Parallel()
	needDebootstrap(t)
	s := openStore(t)
	cas := t.TempDir()
	if err := os.MkdirAll(filepath.Join(cas, "corp"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cas, "corp", "proxy.crt"), []byte("-----BEGIN CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var steps []string
	build := func(name string, fresh, keep bool) Info {
		t.Helper()
		steps = nil
		info, err := s.BuildDebian(context.Background(), name, DebianOptions{CacheDir: packageCache(t), LocalCAs: cas, Fresh: fresh, Keep: keep, Run: chrootRun},
			func(p Progress) {
				if len(steps) == 0 || steps[len(steps)-1] != p.Step {
					steps = append(steps, p.Step)
				}
			})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("steps: %v", steps)
		return info
	}
	hasStep := func(want string) bool { return strings.Contains(" "+strings.Join(steps, " ")+" ", " "+want+" ") }

	info := build("tiny", true, false)
	for _, want := range []string{"index", "extract", "unpack", "configure", "base", "finish"} {
		if !hasStep(want) {
			t.Errorf("no %q step in %v", want, steps)
		}
	}
	if info.Source != SourceDebian || info.Suite == "" || info.Mirror == "" || info.SizeBytes < 50<<20 {
		t.Errorf("info = %+v", info)
	}
	if kept, _ := filepath.Glob(filepath.Join(packageCache(t), "base", info.Suite+"-*.tar")); len(kept) != 1 {
		t.Errorf("base systems kept for %s: %v, want one", info.Suite, kept)
	}
	checkRoot(t, s, "tiny")

	// The next build unpacks the base system kept by the first: the same
	// files, with the same modes (setuid ones too), owners and sizes.
	if build("again", false, false); !hasStep("base") || hasStep("unpack") || hasStep("configure") {
		t.Errorf("steps of a build with a kept base system: %v, want no debootstrap", steps)
	}
	checkRoot(t, s, "again")
	first, _ := s.Get("tiny")
	second, _ := s.Get("again")
	if diff := treeDiff(t, first.RootDir, second.RootDir); len(diff) > 0 {
		t.Errorf("the root unpacked from the kept base differs from debootstrap's: %v", diff)
	}

	// With Keep, a build keeps its whole root under a key of what it is
	// made from, and the next build of the template with the same key
	// unpacks it: no step but that, and the same tree. Other certificate
	// authorities make another key: a build, which replaces the kept one.
	keptOf := func() []string {
		t.Helper()
		kept, err := filepath.Glob(filepath.Join(packageCache(t), "builds", "kept-*.tar"))
		if err != nil {
			t.Fatal(err)
		}
		return kept
	}
	for _, k := range keptOf() { // an earlier run's
		if err := os.Remove(k); err != nil {
			t.Fatal(err)
		}
	}
	if build("kept", false, true); !hasStep("finish") || len(keptOf()) != 1 {
		t.Fatalf("first kept build: steps %v, kept %v; want a build, kept once", steps, keptOf())
	}
	firstKept, kept := keptOf()[0], build("kept", false, true)
	if strings.Join(steps, " ") != "base" {
		t.Errorf("steps of a build kept before: %v, want the unpacking alone", steps)
	}
	checkRoot(t, s, "kept")
	tmpl, err := s.Version("kept", kept.Version)
	if err != nil {
		t.Fatal(err)
	}
	if diff := treeDiff(t, second.RootDir, tmpl.RootDir); len(diff) > 0 {
		t.Errorf("the root unpacked from a kept build differs from a build's: %v", diff)
	}
	if err := os.WriteFile(filepath.Join(cas, "corp", "other.crt"), []byte("-----BEGIN CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if build("kept", false, true); !hasStep("finish") {
		t.Errorf("steps of a build with other authorities: %v, want a build", steps)
	}
	if now := keptOf(); len(now) != 1 || now[0] == firstKept {
		t.Errorf("kept after the authorities changed: %v (first %s), want one, another", now, firstKept)
	}
	assertNoBuilds(t, s)
}

// treeDiff lists the paths whose type, mode, owner or size differ between
// the trees a and b, or that only one has (the first 10).
func treeDiff(t *testing.T, a, b string) []string {
	t.Helper()
	type entry struct {
		mode     os.FileMode
		uid, gid uint32
		size     int64
	}
	walk := func(root string) map[string]entry {
		m := map[string]entry{}
		err := filepath.Walk(root, func(path string, fi os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			st := fi.Sys().(*syscall.Stat_t)
			e := entry{mode: fi.Mode(), uid: st.Uid, gid: st.Gid}
			if fi.Mode().IsRegular() {
				e.size = fi.Size()
			}
			m[strings.TrimPrefix(path, root)] = e
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	ta, tb := walk(a), walk(b)
	var diff []string
	for p, ea := range ta {
		if eb, ok := tb[p]; !ok || ea != eb {
			diff = append(diff, fmt.Sprintf("%s: %+v vs %+v", p, ea, eb))
		}
	}
	for p := range tb {
		if _, ok := ta[p]; !ok {
			diff = append(diff, p+": only in the second")
		}
	}
	return diff[:min(len(diff), 10)]
}

// checkRoot checks the root of the Debian template name built by
// TestBuildDebian.
func checkRoot(t *testing.T, s *Store, name string) {
	t.Helper()
	tmpl, err := s.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	root := tmpl.RootDir
	for _, f := range []string{"usr/bin/apt-get", "usr/bin/bash", ".hutch/hutch", "etc/hosts", "etc/hostname", "usr/local/share/ca-certificates/corp/proxy.crt"} {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Errorf("template root lacks %s: %v", f, err)
		}
	}
	passwd, err := os.ReadFile(filepath.Join(root, "etc/passwd"))
	if err != nil || !strings.Contains(string(passwd), "\nuser:x:1000:1000:") {
		t.Errorf("etc/passwd has no sandbox user: %v\n%s", err, passwd)
	}
	assertOwner(t, filepath.Join(root, "home/user/workspace"), UserUID)
	for _, glob := range []string{"var/cache/apt/archives/*.deb", "var/lib/apt/lists/*_*", "debootstrap"} {
		if left, _ := filepath.Glob(filepath.Join(root, glob)); len(left) > 0 {
			t.Errorf("package caches left in the template: %v", left)
		}
	}
}

// TestBuildDebianStepFails: a step that fails (here, apt-get) fails the
// build, which leaves no template, build or mount.
func TestBuildDebianStepFails(t *testing.T) {
	t.Parallel()
	needDebootstrap(t)
	s := openStore(t)
	var ran []string
	run := func(ctx context.Context, root string, step RunStep) error {
		if strings.Contains(strings.Join(step.Argv, " "), "--second-stage") {
			return chrootRun(ctx, root, step)
		}
		if _, err := os.Stat(filepath.Join(root, "usr/bin/apt-get")); err != nil {
			t.Errorf("the step's root has no apt-get: %v", err)
		}
		ran = append(ran, strings.Join(step.Argv, " "))
		return errdefs.InvalidArgument("the command failed (exit code 100): E: Unable to locate package no-such-package-hutch")
	}
	_, err := s.BuildDebian(context.Background(), "bad", DebianOptions{Packages: []string{"no-such-package-hutch"}, CacheDir: packageCache(t), Run: run}, nil)
	if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "apt-get install no-such-package-hutch") {
		t.Fatalf("err = %v, want an invalid argument naming the package", err)
	}
	if len(ran) != 1 || !strings.Contains(ran[0], "apt-get") {
		t.Errorf("steps run: %q, want the apt-get one", ran)
	}
	if _, err := s.Get("bad"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Get after a failed build: %v, want not found", err)
	}
	assertNoBuilds(t, s)
}

// TestBuildDebianInterrupted cancels a build while it runs.
func TestBuildDebianInterrupted(t *testing.T) {
	t.Parallel()
	needDebootstrap(t)
	s := openStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var once bool
	_, err := s.BuildDebian(ctx, "cut", DebianOptions{CacheDir: packageCache(t), Fresh: true, Run: chrootRun}, func(p Progress) {
		// Cancel once packages are being unpacked: debootstrap has
		// mounted /proc and /sys in the target by then, or soon after.
		if p.Step == "unpack" && !once {
			once = true
			time.AfterFunc(500*time.Millisecond, cancel)
		}
	})
	if err == nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want the build interrupted", err)
	}
	if _, err := s.Get("cut"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Get after an interrupted build: %v, want not found", err)
	}
	assertNoBuilds(t, s)
}

func TestMirrorAddress(t *testing.T) {
	for _, tc := range []struct{ mirror, want string }{
		{"http://deb.debian.org/debian", "deb.debian.org:80"},
		{"https://Mirror.Example.org/debian/", "mirror.example.org:443"},
		{"http://[2001:db8::1]:8080/debian", "[2001:db8::1]:8080"},
		{"file:/srv/mirror", ""},
		{"ftp://m.example/debian", ""},
		{"http://user:pw@m.example/debian", ""},
		{"http:///debian", ""},
	} {
		got, err := mirrorAddress(tc.mirror)
		if tc.want == "" {
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("mirrorAddress(%q) = %q, %v; want an invalid argument", tc.mirror, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("mirrorAddress(%q) = %q, %v; want %q", tc.mirror, got, err, tc.want)
		}
	}
}

func TestAptProgress(t *testing.T) {
	var got []Progress
	for _, line := range []string{
		"Get:1 http://deb.debian.org/debian bookworm/main amd64 jq amd64 1.6-2.1 [64.9 kB]",
		"dlstatus:1:12.5:Retrieving file 1 of 8",
		"pmstatus:jq:87.5:Installing jq (amd64)",
		"pmstatus:broken",
		"dlstatus:2:x:Retrieving",
		"E: Unable to locate package nope",
		"W: Some index files failed to download.",
	} {
		aptProgress(line, func(p Progress) { got = append(got, p) })
	}
	want := []Progress{
		{Step: "download", Done: 12, Total: 100, Message: "Retrieving file 1 of 8"},
		{Step: "install", Done: 87, Total: 100, Message: "Installing jq (amd64)"},
		{Step: "apt", Message: "E: Unable to locate package nope"},
		{Step: "apt", Message: "W: Some index files failed to download."},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("progress:\n got %+v\nwant %+v", got, want)
	}
}

func TestCheckNpm(t *testing.T) {
	for _, tc := range []struct {
		npm, debs []string
		ok        bool
	}{
		{nil, nil, true},
		{[]string{"deno", "bun@1.1.0", "@scope/tool@^2", "typescript@~5.6"}, []string{"nodejs", "npm"}, true},
		{[]string{"deno"}, []string{"nodejs"}, false},
		{[]string{"-g"}, []string{"npm"}, false},
		{[]string{"Deno"}, []string{"npm"}, false},
		{[]string{"deno bun"}, []string{"npm"}, false},
		{[]string{"../x"}, []string{"npm"}, false},
	} {
		err := checkNpm(tc.npm, tc.debs)
		if tc.ok != (err == nil) || (err != nil && !errors.Is(err, errdefs.ErrInvalidArgument)) {
			t.Errorf("checkNpm(%q, %q) = %v, want ok %v", tc.npm, tc.debs, err, tc.ok)
		}
	}
}

// TestBuildDebianNoDisk builds onto a file system too small for the base
// system: a clear error, and nothing kept.
func TestBuildDebianNoDisk(t *testing.T) {
	t.Parallel()
	needDebootstrap(t)
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=48m"); err != nil {
		t.Fatalf("mount a 48 MiB tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(mnt, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount: %v", err)
		}
	})
	s, err := Open(filepath.Join(mnt, "templates"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.BuildDebian(context.Background(), "full", DebianOptions{CacheDir: packageCache(t), Run: chrootRun}, nil)
	if !errors.Is(err, errdefs.ErrResourceExhausted) || !strings.Contains(err.Error(), "disk is full") {
		t.Fatalf("build onto a full disk: %v, want resource exhausted", err)
	}
	if _, err := s.Get("full"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Get after a failed build: %v", err)
	}
	assertNoBuilds(t, s)
}

// The security archive is added to a root's apt sources beside what
// debootstrap wrote, and its host is what the package steps may reach.
func TestAddSecuritySource(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	list := filepath.Join(root, "etc/apt/sources.list")
	if err := os.MkdirAll(filepath.Dir(list), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(list, []byte("deb http://deb.debian.org/debian bookworm main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	host, err := addSecuritySource(root, "http://security.example/debian-security", "bookworm")
	if err != nil || host != "security.example:80" {
		t.Fatalf("addSecuritySource: %q, %v", host, err)
	}
	want := "deb http://deb.debian.org/debian bookworm main\ndeb http://security.example/debian-security bookworm-security main\n"
	if b, err := os.ReadFile(list); err != nil || string(b) != want {
		t.Errorf("sources.list: %q, %v; want %q", b, err, want)
	}
	if _, err := addSecuritySource(root, "ftp://x/", "bookworm"); err == nil {
		t.Error("an ftp archive was taken")
	}
}

// Every default template is named in the order suggestions take, the
// smallest first.
func TestRecipeOrder(t *testing.T) {
	t.Parallel()
	if len(recipeOrder) != len(recipes) {
		t.Errorf("recipeOrder %v, recipes %d", recipeOrder, len(recipes))
	}
	for _, name := range recipeOrder {
		if _, ok := recipes[name]; !ok {
			t.Errorf("recipeOrder names %q, which is no recipe", name)
		}
	}
	if got := RecipesWith("deno"); len(got) == 0 || got[0] != "base" {
		t.Errorf("RecipesWith(deno) = %v, want base first", got)
	}
}
