package fake_test

import (
	"os"
	"testing"

	"github.com/hutchdev/hutch/internal/runtime/backend"
	"github.com/hutchdev/hutch/internal/runtime/backendtest"
	"github.com/hutchdev/hutch/internal/runtime/fake"
)

func TestMain(m *testing.M) {
	if code, ran := fake.Main(); ran {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

func TestConformance(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the fake's agent starts commands as the sandbox user (uid 1000): needs root")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := fake.TempDir(t)
	backendtest.Run(t, backendtest.Harness{
		New:  func(*testing.T) backend.Backend { return fake.New(dir) },
		Spec: func(*testing.T) backend.Spec { return backend.Spec{} },
		Crash: func(t *testing.T, h backend.Handle) {
			if err := fake.New(dir).Kill(h.ID); err != nil {
				t.Fatal(err)
			}
		},
		// List, which the suite checks, reads the sandbox directories; what
		// else a sandbox has is processes: this test binary, run as an agent
		// or shim.
		AssertGone: func(t *testing.T, _ []string) {
			if procs := backendtest.Processes(exe + " hutch-fake-"); len(procs) > 0 {
				t.Errorf("agents or shims left behind: %v", procs)
			}
		},
	})
}
