package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/storage/store"
	"github.com/hutchdev/hutch/internal/storage/store/sqlite"
)

// receiver is a webhook's receiver: it answers fail's statuses first,
// then 200, and keeps what it was sent.
type receiver struct {
	mu   sync.Mutex
	fail []int
	got  []*http.Request
	body [][]byte
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, req)
	r.body = append(r.body, b)
	if len(r.fail) > 0 {
		w.WriteHeader(r.fail[0])
		r.fail = r.fail[1:]
	}
}

func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

// world is a test's outside: public names at public addresses, served by
// local receivers, and a name that resolves to the host's own loopback.
type world struct {
	addrs   map[string]netip.Addr
	servers map[netip.Addr]*httptest.Server
}

// newWorld serves each of hosts at an address of TEST-NET-3 of its own.
func newWorld(t *testing.T, hosts map[string]http.Handler) *world {
	w := &world{addrs: map[string]netip.Addr{}, servers: map[netip.Addr]*httptest.Server{}}
	next := netip.MustParseAddr("203.0.113.10")
	for name, h := range hosts {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		w.addrs[name], w.servers[next] = next, srv
		next = next.Next()
	}
	return w
}

func (w *world) lookup(_ context.Context, _, host string) ([]netip.Addr, error) {
	if host == "inward.test" {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	if a, ok := w.addrs[host]; ok {
		return []netip.Addr{a}, nil
	}
	return nil, errors.New("no such host")
}

// dial connects a public address to its receiver; anything else is dialled
// as it is (what the policy must have refused before).
func (w *world) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if ap, err := netip.ParseAddrPort(addr); err == nil && w.servers[ap.Addr()] != nil {
		addr = w.servers[ap.Addr()].Listener.Addr().String()
	}
	return (&net.Dialer{}).DialContext(ctx, network, addr)
}

func newService(t *testing.T, w *world) (*Service, *sqlite.DB) {
	t.Helper()
	db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "hutch.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	s, err := New(Config{Store: db, Key: "hutch_test", Dial: w.dial, Lookup: w.lookup, Version: "test",
		Backoff: []time.Duration{10 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return s, db
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 5 s for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestDeliveries(t *testing.T) {
	t.Parallel()
	ok, flaky := &receiver{}, &receiver{fail: []int{500, 503}}
	w := newWorld(t, map[string]http.Handler{"ok.test": ok, "flaky.test": flaky})
	s, _ := newService(t, w)
	ctx := t.Context()
	all, err := s.Create(ctx, "acme", "http://ok.test/hook", nil, "a secret of sixteen+")
	if err != nil {
		t.Fatal(err)
	}
	if all.Secret != "a secret of sixteen+" {
		t.Errorf("Create answered secret %q", all.Secret)
	}
	deletes, err := s.Create(ctx, "acme", "http://flaky.test/", []string{"sandbox.deleted"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(deletes.Secret, "whsec_") {
		t.Errorf("a made secret: %q", deletes.Secret)
	}
	if list, err := s.List(ctx, "acme"); err != nil || len(list) != 2 || list[0].Secret != "" {
		t.Errorf("List: %+v, %v (no secret in it)", list, err)
	}
	s.Take([]*store.Event{
		{ID: 1, Time: time.Now().UTC(), Workspace: "acme", Sandbox: "sb1", Type: "sandbox.created", Reason: "created"},
		{ID: 2, Time: time.Now().UTC(), Workspace: "other", Sandbox: "sb9", Type: "sandbox.created"},
		{ID: 3, Time: time.Now().UTC(), Workspace: "acme", Sandbox: "sb1", Type: "sandbox.deleted", Reason: "idle_timeout", Message: "idle for 1m0s"},
	})
	waitFor(t, "two events at ok.test and three attempts at flaky.test", func() bool { return ok.count() == 2 && flaky.count() == 3 })

	ok.mu.Lock()
	for i, req := range ok.got {
		var b Body
		if err := json.Unmarshal(ok.body[i], &b); err != nil || b.Workspace != "acme" {
			t.Errorf("a delivery's body: %s, %v", ok.body[i], err)
		}
		sig := req.Header.Get(HeaderSignature)
		ts, _, _ := strings.Cut(strings.TrimPrefix(sig, "t="), ",")
		sec, _ := strconv.ParseInt(ts, 10, 64)
		if want := Sign([]byte("a secret of sixteen+"), time.Unix(sec, 0), ok.body[i]); sig != want || time.Since(time.Unix(sec, 0)) > time.Minute {
			t.Errorf("signature %q, want %q", sig, want)
		}
		if req.Header.Get(HeaderWebhook) != all.ID || req.Header.Get(HeaderEventID) != strconv.FormatInt(b.ID, 10) || req.Header.Get(HeaderEvent) != b.Type ||
			b.ID != 1 && b.ID != 3 {
			t.Errorf("a delivery's headers: %v, of %s", req.Header, ok.body[i])
		}
	}
	ok.mu.Unlock()
	var ds []*store.Delivery
	waitFor(t, "flaky.test's three attempts recorded", func() bool {
		ds, err = s.Deliveries(ctx, "acme", deletes.ID, 0)
		return err == nil && len(ds) == 3
	})
	if ds[0].Attempt != 3 || ds[0].Status != 200 || ds[1].Status != 503 || ds[2].Status != 500 || ds[2].Event != 3 {
		t.Errorf("flaky.test's deliveries, newest first: %+v %+v %+v", ds[0], ds[1], ds[2])
	}
	if _, err := s.Deliveries(ctx, "other", deletes.ID, 0); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("another workspace's deliveries: %v, want not found", err)
	}
	if err := s.Delete(ctx, "other", all.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("another workspace deleting acme's webhook: %v, want not found", err)
	}
}

// A webhook is the daemon posting to a URL a tenant chose: it must not
// reach the host itself, its private networks or the cloud's metadata,
// by an address written in the URL or by a name that resolves to one.
func TestAttackWebhookToHost(t *testing.T) {
	t.Parallel()
	var hit atomic.Int32
	host := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hit.Add(1) }))
	t.Cleanup(host.Close)
	_, port, _ := net.SplitHostPort(host.Listener.Addr().String())
	w := newWorld(t, nil)
	s, _ := newService(t, w)
	ctx := t.Context()
	for _, u := range []string{"http://127.0.0.1:" + port + "/", "http://[::1]:" + port + "/", "http://169.254.169.254/latest/meta-data",
		"http://10.0.0.1/", "http://user:pw@ok.test/", "ftp://ok.test/", "http:///nohost"} {
		if _, err := s.Create(ctx, "acme", u, nil, ""); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("a webhook to %s: %v, want refused", u, err)
		}
	}
	// A name is resolved at each delivery, and its inward address refused.
	wh, err := s.Create(ctx, "acme", "http://inward.test:"+port+"/", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	s.Take([]*store.Event{{ID: 1, Time: time.Now().UTC(), Workspace: "acme", Type: "sandbox.created"}})
	var ds []*store.Delivery
	waitFor(t, "the attempts to be given up", func() bool {
		ds, _ = s.Deliveries(ctx, "acme", wh.ID, 0)
		return len(ds) == 4
	})
	if hit.Load() != 0 {
		t.Errorf("the host's own listener was reached %d times", hit.Load())
	}
	if ds[0].Status != 0 || !strings.Contains(ds[0].Error, "refused by policy") {
		t.Errorf("the last attempt: %+v, want refused by policy", ds[0])
	}
}
