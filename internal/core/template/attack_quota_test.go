package template

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/hutchdev/hutch/internal/core/create"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/runtime/backend"
	"github.com/hutchdev/hutch/internal/storage/rootfs/imagetest"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// Attacks on the quotas of issue 36, finding 14 (docs/security.md): a
// workspace's template builds ran their steps with 4 GiB and every CPU of
// the host whatever its quota, beside its sandboxes, and its pulls and
// imports unpacked whatever their layers held.

// stepSpy is a build backend that tells the spec of each build step's
// sandbox and makes none: the step fails right there, the build with it.
// While hold is open, its Create waits.
type stepSpy struct {
	backend.Backend
	specs chan backend.Spec
	hold  chan struct{}
}

func (s *stepSpy) Create(ctx context.Context, spec backend.Spec) (backend.Handle, error) {
	s.specs <- spec
	if s.hold != nil {
		<-s.hold
	}
	return backend.Handle{}, errdefs.Unavailable("the spy makes no sandbox")
}

// Capabilities: it runs build steps.
func (s *stepSpy) Capabilities() backend.Capabilities { return backend.Capabilities{Build: s} }

func (s *stepSpy) ListenIn(context.Context, backend.Handle, string) (net.Listener, error) {
	return nil, errdefs.NotImplemented("spy")
}

func (s *stepSpy) Export(context.Context, backend.Handle, string) error {
	return errdefs.NotImplemented("spy")
}

var _ backend.Builder = (*stepSpy)(nil)

// Finding 14: a workspace's build step runs within its quota: with what
// the quota leaves of memory and CPUs, counted with its sandboxes while it
// runs (a sandbox that would pass the quota meanwhile is refused), and
// refused with resource_exhausted when its sandboxes use the quota. The
// administrator's steps keep the daemon's limits.
func TestAttackBuildIgnoresQuota(t *testing.T) {
	t.Parallel()
	spy := &stepSpy{specs: make(chan backend.Spec, 4)}
	c, s := start(t, func(cfg *Config) { cfg.BuildBackend = spy })
	ctx := t.Context()
	commitTemplate(t, c.Templates, "base")
	if err := c.Quotas.SetQuota(ctx, "acme", store.Quota{MemoryMB: 1024, CPUs: 1, DiskMB: 2048}); err != nil {
		t.Fatal(err)
	}
	build := func(name, ws string, admin bool) error {
		_, err := s.Build(ctx, BuildRequest{Name: name, Workspace: ws, Admin: admin, Hutchfile: "FROM base\nRUN true\n"}, nil)
		return err
	}

	// The step holds its limits while it runs.
	spy.hold = make(chan struct{})
	built := make(chan error, 1)
	go func() { built <- build("app~acme", "acme", false) }()
	spec := <-spy.specs
	if spec.Limits.MemoryBytes > 1024<<20 || spec.Limits.CPUs > 1 || spec.Limits.DiskBytes > 2048<<20 {
		t.Errorf("acme's build step: %d MiB, %g CPUs, %d MiB of disk; acme's quota is 1024 MiB, 1 CPU, 2048 MiB",
			spec.Limits.MemoryBytes>>20, spec.Limits.CPUs, spec.Limits.DiskBytes>>20)
	}
	if sb, _, err := c.M.Create(ctx, create.Options{Workspace: "acme", MemoryMB: 512, CPUs: 0.5}); !errors.Is(err, errdefs.ErrResourceExhausted) {
		if sb != nil {
			_ = c.M.Delete(context.WithoutCancel(ctx), sb.ID)
		}
		t.Errorf("a sandbox of acme while its build step holds the quota: %v, want resource exhausted", err)
	}
	close(spy.hold)
	if err := <-built; err == nil {
		t.Fatal("the build with the spy's steps succeeded")
	}
	spy.hold = nil

	// With its sandboxes at the quota, a build step is refused, and no
	// step's sandbox is made.
	c.Create(t, create.Options{Workspace: "acme", MemoryMB: 1024, CPUs: 1})
	err := build("app~acme", "acme", false)
	if !errors.Is(err, errdefs.ErrResourceExhausted) || !strings.Contains(err.Error(), "quota of memory") || !strings.Contains(err.Error(), "build step") {
		t.Errorf("acme's build with its quota in use: %v, want resource exhausted saying why", err)
	}
	select {
	case spec := <-spy.specs:
		t.Errorf("a build step's sandbox was made past acme's quota: %+v", spec.Limits)
	default:
	}
	if _, err := c.Templates.Info("app~acme"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("template app~acme after refused builds: %v", err)
	}

	// A workspace without a quota, and the administrator, keep the
	// daemon's limits.
	for _, b := range []struct {
		name, ws string
		admin    bool
	}{{"app~other", "other", false}, {"shared", "", true}} {
		if err := build(b.name, b.ws, b.admin); err == nil {
			t.Fatalf("build %s with the spy's steps succeeded", b.name)
		}
		spec := <-spy.specs
		if spec.Limits.MemoryBytes != buildMemoryMB<<20 || spec.Limits.CPUs != float64(runtime.NumCPU()) || spec.Limits.DiskBytes != buildDiskMB<<20 {
			t.Errorf("build step of %s: %+v, want the daemon's limits", b.name, spec.Limits)
		}
	}
}

// Finding 14: a workspace's import unpacked whatever its image's layers
// held, however far past the workspace's disk quota. An import whose
// layers unpack past it (or whose archive alone is past it) stops with
// resource_exhausted and leaves nothing; a workspace without a quota, and
// the administrator, import it as before.
func TestAttackImageImportUnbounded(t *testing.T) {
	t.Parallel()
	c, s := start(t)
	ctx := t.Context()
	commitTemplate(t, c.Templates, "base")
	base, err := c.Templates.Get("base")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(filepath.Dir(filepath.Dir(base.RootDir))) // DIR/base/VERSION/rootfs
	if err = c.Quotas.SetQuota(ctx, "acme", store.Quota{DiskMB: 1}); err != nil {
		t.Fatal(err)
	}
	archive := func(body func(i int) string) []byte {
		var entries []imagetest.Entry
		for i := range 8 {
			entries = append(entries, imagetest.Entry{Name: "big/" + string(rune('a'+i)), Body: body(i)})
		}
		var buf bytes.Buffer
		tag, _ := name.NewTag("hutch.test/big:v1")
		if err := tarball.Write(tag, imagetest.Image(t, imagetest.Layer(t, entries...)), &buf); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	// 8 MiB of zeros: the archive is small, what it unpacks to is not.
	zeros := archive(func(int) string { return strings.Repeat("\x00", 1<<20) })
	if len(zeros) > 1<<20 {
		t.Fatalf("the archive of zeros is %d bytes, meant to be small", len(zeros))
	}
	// 2 MiB that do not compress: the archive itself is past the quota.
	noise := archive(func(int) string { return string(randomBytes(t, 256<<10)) })

	var wg sync.WaitGroup
	for what, data := range map[string][]byte{"zeros": zeros, "noise": noise} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Import(ctx, what+"~acme", bytes.NewReader(data), nil)
			if !errors.Is(err, errdefs.ErrResourceExhausted) {
				t.Errorf("import of %s (%d KiB archive) past acme's quota of 1 MiB: %v, want resource exhausted", what, len(data)>>10, err)
			}
		}()
	}
	wg.Wait()
	for _, what := range []string{"zeros", "noise"} {
		if _, err := c.Templates.Info(what + "~acme"); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("template %s~acme after the refused import: %v", what, err)
		}
		if _, err := os.Stat(filepath.Join(dir, what+"~acme")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("directory of %s~acme after the refused import: %v", what, err)
		}
	}
	if left, err := filepath.Glob(filepath.Join(dir, ".build-*")); err != nil || len(left) > 0 {
		t.Errorf("left in the template store: %v %v", left, err)
	}

	for _, name := range []string{"zeros~other", "zeros"} {
		if info, err := s.Import(ctx, name, bytes.NewReader(zeros), nil); err != nil || info.SizeBytes < 8<<20 {
			t.Errorf("import of %s: %+v, %v; want it made", name, info, err)
		}
	}
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}
