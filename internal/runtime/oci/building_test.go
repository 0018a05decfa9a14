package oci

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A runtime binary being built (its marker names a live process) is
// pending, even once the binary is there half written; a marker left by a
// build that is gone, or too old to be believed, is not: the binary is
// then missing, as without a marker.
func TestProbePendingWhileBuilding(t *testing.T) {
	dir := t.TempDir()
	binary := filepath.Join(dir, "runsc")
	r := New(GvisorConfig(binary))
	marker := binary + BuildingSuffix
	if h := r.Probe(t.Context()); h.Usable || h.Pending || !strings.Contains(h.Reason, "not found") {
		t.Fatalf("no binary, no marker: %+v; want not usable, not pending", h)
	}

	writeMarker := func(pid int) {
		t.Helper()
		if err := os.WriteFile(marker, []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeMarker(os.Getpid())
	if h := r.Probe(t.Context()); h.Usable || !h.Pending || !strings.Contains(h.Reason, "is being built") {
		t.Errorf("marker of a live build: %+v; want pending, saying it is being built", h)
	}
	if err := os.WriteFile(binary, []byte("#!/bin/sh\necho half\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if h := r.Probe(t.Context()); !h.Pending {
		t.Errorf("binary there while the build runs: %+v; want still pending", h)
	}
	if err := os.Remove(binary); err != nil {
		t.Fatal(err)
	}

	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	writeMarker(gone.Process.Pid)
	if h := r.Probe(t.Context()); h.Pending || !strings.Contains(h.Reason, "not found") {
		t.Errorf("marker of a build that is gone: %+v; want the binary missing", h)
	}

	writeMarker(os.Getpid())
	old := time.Now().Add(-maxBuild - time.Minute)
	if err := os.Chtimes(marker, old, old); err != nil {
		t.Fatal(err)
	}
	if h := r.Probe(t.Context()); h.Pending {
		t.Errorf("marker older than any build: %+v; want not pending", h)
	}

	writeMarker(os.Getpid())
	t.Chdir(dir) // where runsc.building would be found as a relative name
	if h := New(GvisorConfig("runsc")).Probe(t.Context()); h.Pending {
		t.Errorf("a binary looked up in PATH has no marker: %+v", h)
	}
}
