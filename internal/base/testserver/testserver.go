// Package testserver keeps one server for all the tests of a test binary:
// started by the first test that asks for it, stopped once they have all
// run (Main). pgtest's Postgres and s3test's S3 gateway are kept so; a
// test that asks without Main starts a server of its own.
package testserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
)

// Shared is one test binary's server of type S.
type Shared[S any] struct {
	// Name names the server in Main's messages.
	Name string
	// Start starts a server; an error wrapping SkipErr skips the tests that
	// ask for it (a machine that cannot run it), any other fails them.
	Start   func(ctx context.Context) (S, error)
	Stop    func(S) error
	SkipErr error
	// Skip skips t for reason (t.Skip when nil).
	Skip func(t testing.TB, reason string)

	mu      sync.Mutex
	inMain  bool
	started bool
	srv     S
	err     error
	skip    string
}

// Main runs the tests (m.Run), then stops the server if one started. Call
// it from TestMain.
func (s *Shared[S]) Main(m *testing.M) {
	s.mu.Lock()
	s.inMain = true
	s.mu.Unlock()
	// TestMain returning makes the test binary exit with m.Run's code.
	defer func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.started && s.err == nil && s.skip == "" {
			if err := s.Stop(s.srv); err != nil {
				fmt.Fprintf(os.Stderr, "%s: %v\n", s.Name, err)
			}
		}
	}()
	m.Run()
}

// Get returns the server, started on first use, or skips or fails t when it
// could not start. Without Main it returns ok false: the caller starts one
// of its own.
func (s *Shared[S]) Get(t testing.TB) (srv S, ok bool) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.inMain {
		return srv, false
	}
	if !s.started {
		s.started = true
		// Not t.Context(): the server outlives this test.
		s.srv, s.err = s.Start(context.Background())
		if errors.Is(s.err, s.SkipErr) {
			s.skip, s.err = s.err.Error(), nil
		}
	}
	switch {
	case s.skip != "":
		s.skipTest(t, s.skip)
	case s.err != nil:
		t.Fatal(s.err)
	}
	return s.srv, true
}

func (s *Shared[S]) skipTest(t testing.TB, reason string) {
	t.Helper()
	if s.Skip != nil {
		s.Skip(t, reason)
	}
	t.Skip(reason)
}
