package core

import (
	"testing"

	"github.com/hutchdev/hutch/internal/storage/rootfs"
)

func TestValidEnvName(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"PATH": true, "_x": true, "a1_B2": true, "x": true,
		"": false, "1A": false, "A-B": false, "A B": false, "A=B": false, "É": false,
	} {
		if got := rootfs.ValidEnvName(name); got != want {
			t.Errorf("rootfs.ValidEnvName(%q) = %v, want %v", name, got, want)
		}
	}
}
