package oci

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Runtimes of one binary share its sealed copy, which runs by each one's
// link, named after the binary, also once another made its own link in
// the same place; the copy is sealed as runc requires of its own.
func TestSealedCopy(t *testing.T) {
	if _, err := exec.LookPath("runc"); err != nil {
		t.Skip("runc is not installed")
	}
	state := filepath.Join(t.TempDir(), "runc")
	first := New(Config{Name: "runc", Binary: "runc", SealedCopy: true, StateRoot: state})
	second := New(Config{Name: "runc", Binary: "runc", SealedCopy: true, StateRoot: state})
	exe := first.executable()
	if exe != state+".bin/runc" || second.executable() != exe {
		t.Fatalf("executables %q and %q, want both %s.bin/runc", exe, second.executable(), state)
	}
	// The second dropped (the link now its), the first still runs: a
	// per-Runtime copy closed by the garbage collector broke every test
	// after one in CI.
	second = nil
	for range 3 {
		runtime.GC()
		time.Sleep(10 * time.Millisecond) // finalizers run on a goroutine of their own
	}
	out, err := exec.CommandContext(t.Context(), first.executable(), "--version").Output()
	if err != nil || !strings.HasPrefix(string(out), "runc version") {
		t.Fatalf("%s --version: %q, %v", exe, out, err)
	}
	f, err := os.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seals, err := unix.FcntlInt(f.Fd(), unix.F_GET_SEALS, 0)
	if err != nil || seals != runcSeals {
		t.Errorf("seals %#x (%v), want %#x", seals, err, runcSeals)
	}
	if err := os.WriteFile(exe, []byte("x"), 0o700); err == nil {
		t.Error("the sealed copy was written to")
	}
}
