package mitm

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The host the sandbox's connections are for, and secrets for it.
const (
	apiHost = "api.test"
	ph1     = "hutch-secret-OPENAI_KEY-9f2c0a1b2c3d4e5f60718293"
	v1      = "sk-live/abc+def=ghi&jkl" // '/', '+', '=' and '&' need escaping in a query
	ph2     = "hutch-secret-GH_TOKEN-00112233445566778899aabb"
	v2      = "ghp_second"
	ph3     = "hutch-secret-UNRELATED-ffeeddccbbaa998877665544" // in no test's swaps
)

// config is what a harness is made with.
type config struct {
	// The host: an httptest server with handler, or a raw TLS server
	// that runs raw on each connection.
	handler http.Handler
	raw     func(*tls.Conn)
	// cert makes the host's certificate; nil: one for api.test from the
	// host's CA, which the interceptor trusts.
	cert  func(hostCA *CA) (*tls.Certificate, error)
	swaps []Swap
	// lookup, when not nil, is asked for the swaps of each request
	// instead.
	lookup func() []Swap
	// smallBuffers gives every socket 64 KiB buffers, so that what is in
	// flight between the client and the host is small and known.
	smallBuffers bool
	// idleTimeout is the host's (httptest) idle timeout.
	idleTimeout time.Duration
}

// harness is a host, an Interceptor in front of it the way netproxy
// uses one (peek the ClientHello, dial the host, Serve), and what the
// sandbox needs to reach it: all on loopback.
type harness struct {
	t      *testing.T
	cfg    config
	hutch  *CA
	pool   *x509.CertPool // trusts hutch: the sandbox's roots
	hostCA *CA
	upAddr string
	ln     net.Listener
	ic     *Interceptor

	cancel context.CancelFunc // ends every Serve, as a sandbox's end does

	accepted atomic.Int64
	out, in  atomic.Int64
	results  chan error // Serve's, one per connection
}

func newHarness(t *testing.T, cfg config) *harness {
	t.Helper()
	h := &harness{t: t, cfg: cfg, results: make(chan error, 1024)}
	h.hutch = mustCA(t)
	h.pool = x509.NewCertPool()
	h.pool.AppendCertsFromPEM(h.hutch.CertPEM())
	h.hostCA = mustCA(t)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(h.hostCA.CertPEM())
	h.ic = &Interceptor{CA: h.hutch, RootCAs: roots}

	makeCert := cfg.cert
	if makeCert == nil {
		makeCert = func(ca *CA) (*tls.Certificate, error) { return ca.Leaf(apiHost) }
	}
	cert, err := makeCert(h.hostCA)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case cfg.handler != nil:
		srv := httptest.NewUnstartedServer(cfg.handler)
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{*cert}}
		srv.Config.ErrorLog = log.New(io.Discard, "", 0) // failed handshakes are the point of some tests
		srv.Config.IdleTimeout = cfg.idleTimeout
		if cfg.smallBuffers {
			srv.Listener = smallListener{srv.Listener}
		}
		srv.StartTLS()
		t.Cleanup(srv.Close)
		h.upAddr = srv.Listener.Addr().String()
	case cfg.raw != nil:
		h.upAddr = startRaw(t, *cert, cfg.raw)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.ln = ln
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	var served sync.WaitGroup
	served.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			h.accepted.Add(1)
			served.Go(func() { h.results <- h.serve(ctx, c) })
		}
	})
	t.Cleanup(func() {
		cancel()
		_ = ln.Close()
		served.Wait()
	})
	return h
}

// serve does what netproxy does with a connection to a secret's host.
func (h *harness) serve(ctx context.Context, c net.Conn) error {
	if h.cfg.smallBuffers {
		setSmallBuffers(c)
	}
	head, err := readHello(c)
	if err != nil {
		_ = c.Close()
		return err
	}
	up, err := net.Dial("tcp", h.upAddr)
	if err != nil {
		_ = c.Close()
		return err
	}
	if h.cfg.smallBuffers {
		setSmallBuffers(up)
	}
	lookup := h.cfg.lookup
	if lookup == nil {
		lookup = func() []Swap { return h.cfg.swaps }
	}
	return h.ic.Serve(ctx, c, head, apiHost, up, lookup, func(out bool, n int64) {
		if out {
			h.out.Add(n)
		} else {
			h.in.Add(n)
		}
	})
}

// result returns the next result of Serve.
func (h *harness) result() error {
	h.t.Helper()
	select {
	case err := <-h.results:
		return err
	case <-time.After(10 * time.Second):
		h.t.Fatal("Serve did not return")
		return nil
	}
}

// client is an HTTP client in the sandbox: every connection goes to the
// interceptor, and it trusts the Hutch CA.
func (h *harness) client() *http.Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, "tcp", h.ln.Addr().String())
			if err == nil && h.cfg.smallBuffers {
				setSmallBuffers(c)
			}
			return c, err
		},
		TLSClientConfig:       &tls.Config{RootCAs: h.pool},
		ExpectContinueTimeout: 10 * time.Second,
	}
	h.t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// dial opens a TLS connection to api.test from the sandbox, offering
// protos.
func (h *harness) dial(protos ...string) (*tls.Conn, error) {
	c, err := net.Dial("tcp", h.ln.Addr().String())
	if err != nil {
		return nil, err
	}
	tc := tls.Client(c, &tls.Config{ServerName: apiHost, RootCAs: h.pool, NextProtos: protos})
	_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
	if err := tc.Handshake(); err != nil {
		_ = c.Close()
		return nil, err
	}
	return tc, nil
}

// readHello reads the first TLS record off c, as netproxy's peek does.
func readHello(c net.Conn) ([]byte, error) {
	head := make([]byte, 5)
	if _, err := io.ReadFull(c, head); err != nil {
		return nil, err
	}
	if head[0] != 0x16 {
		return nil, errors.New("not a TLS handshake")
	}
	rec := make([]byte, int(head[3])<<8|int(head[4]))
	if _, err := io.ReadFull(c, rec); err != nil {
		return nil, err
	}
	return append(head, rec...), nil
}

// startRaw serves serve on each TLS connection to a loopback listener
// until the test ends.
func startRaw(t *testing.T, cert tls.Certificate, serve func(*tls.Conn)) string {
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				serve(c.(*tls.Conn))
			})
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	return ln.Addr().String()
}

func mustCA(t *testing.T) *CA {
	t.Helper()
	ca, err := LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// smallListener gives each connection it accepts small buffers.
type smallListener struct{ net.Listener }

func (l smallListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		setSmallBuffers(c)
	}
	return c, err
}

func setSmallBuffers(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(64 << 10)
		_ = tc.SetWriteBuffer(64 << 10)
	}
}
