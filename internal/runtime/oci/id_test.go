package oci

import (
	"strings"
	"testing"
)

func TestValidID(t *testing.T) {
	for id, want := range map[string]bool{
		"a": true, "0abc9xyz": true, strings.Repeat("a", 40): true,
		"": false, strings.Repeat("a", 41): false, "A": false, "a-b": false, "../x": false, "a/b": false,
	} {
		if got := validID(id); got != want {
			t.Errorf("validID(%q) = %v, want %v", id, got, want)
		}
	}
}
