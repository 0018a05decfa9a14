package screenshot

import (
	"strings"
	"testing"

	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// A screenshot asked for gets defaults; a bad one is an invalid argument
// that names every problem.
func TestShotCheck(t *testing.T) {
	t.Parallel()
	got, err := Shot{Sandbox: "sb", Port: 3000}.check()
	if err != nil || got.Width != 1280 || got.Height != 800 || got.Path != "/" {
		t.Errorf("defaults: %+v, %v", got, err)
	}
	for _, tc := range []struct {
		shot Shot
		want []string
	}{
		{Shot{Port: 0}, []string{"port must be from 1 to 65535, got 0"}},
		{Shot{Port: 80, Path: "page"}, []string{`path must start with /, got "page"`}},
		{Shot{Port: 80, Width: MaxSize + 1, Height: -1}, []string{"width and height must be from 1 to 8192"}},
		{Shot{Port: 80, FullPage: true, Clip: &Clip{X: -1, W: 0, H: 10}}, []string{"give clip or full_page, not both", "clip must have x and y from 0"}},
		{Shot{Port: 70000, Clip: &Clip{W: 1, H: MaxSize + 1}}, []string{"port must be", "clip must have"}},
	} {
		_, err := tc.shot.check()
		if errdefs.Kind(err) != errdefs.ErrInvalidArgument {
			t.Errorf("%+v: %v, want an invalid argument", tc.shot, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: %q does not say %q", tc.shot, err, w)
			}
		}
	}
}
