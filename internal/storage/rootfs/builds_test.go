package rootfs

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// A build under way is told to whoever looks for its template meanwhile,
// with how far it is; the next build of the name expects to take as long
// as the last did.
func TestBuildsUnderWay(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	b, err := s.Begin("slow")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Abort() }()
	s.Report("slow", Progress{Step: "unpack", Done: 2, Total: 5})
	if _, err := s.Info("slow"); !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "unpack 2/5") {
		t.Errorf("Info of a template being built: %v, want unavailable with its progress", err)
	}
	builds := s.Builds()
	if len(builds) != 1 || builds[0].Name != "slow" || builds[0].Last.Step != "unpack" || builds[0].Expected != 0 {
		t.Fatalf("Builds: %+v, want the one build, with no earlier one to expect from", builds)
	}
	if err := os.MkdirAll(b.Root(), 0o755); err != nil {
		t.Fatal(err)
	}
	info, err := b.Commit(Info{Source: SourceDebian})
	if err != nil {
		t.Fatal(err)
	}
	if info.BuildSeconds <= 0 || len(s.Builds()) != 0 {
		t.Fatalf("after the commit: build took %v s, builds %+v", info.BuildSeconds, s.Builds())
	}
	again, err := s.Begin("slow")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = again.Abort() }()
	next := s.Builds()[0]
	if next.Expected != time.Duration(info.BuildSeconds*float64(time.Second)) {
		t.Errorf("the next build expects %v, want %v s", next.Expected, info.BuildSeconds)
	}
	if d := next.Describe(next.Began.Add(next.Expected + time.Minute)); !strings.Contains(d, "longer than the last build") {
		t.Errorf("a build past the last one's length: %q", d)
	}
}
