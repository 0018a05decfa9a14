package backendtest

import (
	"context"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/net/netproxy"
	"github.com/hutchdev/hutch/internal/net/sandboxnet"
)

// testNetwork checks a networked backend's sandboxes: every TCP connection
// a sandbox makes, to any address, reaches the daemon's listener in its
// router namespace, with its original destination; with no listener there
// it is refused at once; and so it stays after a suspend and resume (runc
// makes a new namespace, gVisor copies the same one again) and for a
// restarted daemon's backend.
func (s *suite) testNetwork(t *testing.T) {
	nb := s.backend.Capabilities().Network
	if nb == nil {
		t.Skip("the backend gives sandboxes no network")
	}
	sb := s.create(t)
	router, err := nb.Network(t.Context(), sb.handle)
	if err != nil || router == "" {
		t.Fatalf("Network: %q, %v", router, err)
	}
	// Nothing listens yet: refused, not left to time out.
	began := time.Now()
	if r := sb.sh(t, "bash -c 'exec 3<>/dev/tcp/203.0.113.9/443'"); r.exitCode == 0 || time.Since(began) > 5*time.Second {
		t.Errorf("a connection with no daemon listening: %+v after %v, want refused at once", r, time.Since(began))
	}
	reaches := func(when string) {
		t.Helper()
		ls, err := (&sandboxnet.Net{Router: router}).Listen()
		if err != nil {
			t.Fatalf("%s: listen in the router namespace: %v", when, err)
		}
		defer func() { _ = ls.Close() }()
		got := make(chan string, 1)
		go func() {
			c, err := ls.Proxy.Accept()
			if err != nil {
				got <- err.Error()
				return
			}
			defer c.Close()
			orig, err := netproxy.OriginalDst(c)
			if err != nil {
				got <- err.Error()
				return
			}
			_, _ = c.Write([]byte("hello\\n"))
			got <- orig.String()
		}()
		out := sb.mustSh(t, "bash -c 'exec 3<>/dev/tcp/203.0.113.9/443 && head -1 <&3'")
		if out != "hello\\n" {
			t.Errorf("%s: a connection out of the sandbox read %q", when, out)
		}
		select {
		case dest := <-got:
			if dest != "203.0.113.9:443" {
				t.Errorf("%s: original destination %q", when, dest)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("%s: the listener got no connection", when)
		}
	}
	reaches("after create")
	if suspender := s.backend.Capabilities().Suspend; suspender != nil {
		ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
		defer cancel()
		if err := suspender.Suspend(ctx, sb.handle, true); err != nil {
			t.Fatalf("Suspend: %v", err)
		}
		if err := suspender.Resume(ctx, sb.handle, sb.spec); err != nil {
			t.Fatalf("Resume: %v", err)
		}
		sb.agent.CloseIdleConnections()
		reaches("after a suspend and resume")
	}
	restarted := s.h.New(t)
	if err := restarted.Recover(t.Context(), sb.handle); err != nil {
		t.Fatalf("Recover: %v", err)
	}
	again, err := restarted.Capabilities().Network.Network(t.Context(), sb.handle)
	if err != nil || again != router {
		t.Errorf("Network after a restart: %q, %v; want %q", again, err, router)
	}
}
