package imagestore

import (
	"errors"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/internal/base/errdefs"
)

func TestValidName(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat("a/", maxSegments-1) + "a"
	for _, name := range []string{"a", "sandboxes/abc123def456/7/upper.tar.zst", "A-Z_0.9", "a.", "a..b", deep,
		strings.Repeat("x", maxSegmentLen)} {
		if err := ValidName(name); err != nil {
			t.Errorf("ValidName(%q) = %v", name, err)
		}
		if err := validPrefix(name); err != nil {
			t.Errorf("validPrefix(%q) = %v", name, err)
		}
	}
	for _, name := range []string{"", ".", "..", "../a", "a/..", "/a", "a/", "a//b", ".a", "a/.tmp-1", "a b", "a\\b", "a:b",
		"é", "a\x00", deep + "/a", strings.Repeat("x", maxSegmentLen+1), strings.Repeat("abcdefg/", 64) + "x"} {
		if err := ValidName(name); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("ValidName(%q) = %v, want ErrInvalidArgument", name, err)
		}
	}
	for _, prefix := range []string{"", "a/", "sandboxes/ab", deep + "/"} {
		if err := validPrefix(prefix); err != nil {
			t.Errorf("validPrefix(%q) = %v", prefix, err)
		}
	}
	for _, prefix := range []string{"/", "..", "a/../", ".", "a//", deep + "/a", "a/.t"} {
		if err := validPrefix(prefix); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("validPrefix(%q) = %v, want ErrInvalidArgument", prefix, err)
		}
	}
}
