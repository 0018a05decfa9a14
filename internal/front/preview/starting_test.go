package preview

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// startingService is what a test's Target.Starting says: whether the
// service on the port starts, and how often it was asked.
type startingService struct {
	starting atomic.Bool
	asked    atomic.Int32
}

func (s *startingService) isStarting(context.Context) bool {
	s.asked.Add(1)
	return s.starting.Load()
}

// startingSetup is setup with a service on every port, starting as svc
// says: the API's front sets Target.Starting so.
func startingSetup(t *testing.T) (*fakeCore, *startingService, *httptest.Server, *http.Client) {
	t.Helper()
	core := &fakeCore{sb: newFakeSandbox(t)}
	svc := &startingService{}
	p := New(Config{Acquire: core.acquire, WakePage: 50 * time.Millisecond, ListenWait: 5 * time.Second})
	mux := http.NewServeMux()
	mux.HandleFunc("/sb/{id}/{port}/{path...}", func(w http.ResponseWriter, r *http.Request) {
		port, _ := strconv.Atoi(r.PathValue("port"))
		prefix := "/sb/" + r.PathValue("id") + "/" + r.PathValue("port")
		err := p.Serve(w, r, Target{Sandbox: r.PathValue("id"), Port: port, Prefix: prefix, Starting: svc.isStarting})
		if err != nil {
			http.Error(w, errdefs.Kind(err).Error()+": "+err.Error(), http.StatusBadGateway)
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c := srv.Client()
	t.Cleanup(c.CloseIdleConnections)
	return core, svc, srv, c
}

// echo answers "app", then the request's path and body.
var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	_, _ = io.WriteString(w, "app "+r.URL.Path+" "+string(body))
})

// answer is a request's answer, or why there is none.
type answer struct {
	status int
	body   string
	err    error
}

// send makes req in the background; its answer comes on the channel.
func send(c *http.Client, req *http.Request) <-chan answer {
	out := make(chan answer, 1)
	go func() {
		resp, err := c.Do(req)
		if err != nil {
			out <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		out <- answer{status: resp.StatusCode, body: string(b), err: err}
	}()
	return out
}

// A request the port refuses while the service on it starts (a restart,
// the sandbox awake) waits for the port and goes again, its body whole.
// Without a starting service on the port it is answered bad_gateway at
// once, as when nothing was known.
func TestStartingService(t *testing.T) {
	for _, tt := range []struct {
		name     string
		starting bool
		request  func(t *testing.T, srv *httptest.Server) *http.Request
		want     string // the answer's body once the port listens; "" for bad_gateway at once
	}{
		{"a GET waits", true, func(t *testing.T, srv *httptest.Server) *http.Request {
			req, _ := http.NewRequest(http.MethodGet, srv.URL+"/sb/sb1/3000/page", nil)
			return req
		}, "app /page "},
		{"a POST waits, its body whole", true, func(t *testing.T, srv *httptest.Server) *http.Request {
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/sb/sb1/3000/form", strings.NewReader("name=hutch"))
			return req
		}, "app /form name=hutch"},
		{"a streamed body waits too", true, func(t *testing.T, srv *httptest.Server) *http.Request {
			req, _ := http.NewRequest(http.MethodPut, srv.URL+"/sb/sb1/3000/upload", io.MultiReader(strings.NewReader("chunked "), strings.NewReader("body")))
			return req
		}, "app /upload chunked body"},
		{"no service starting", false, func(t *testing.T, srv *httptest.Server) *http.Request {
			req, _ := http.NewRequest(http.MethodGet, srv.URL+"/sb/sb1/3000/page", nil)
			return req
		}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			core, svc, srv, c := startingSetup(t)
			svc.starting.Store(tt.starting)
			answered := send(c, tt.request(t, srv))
			if tt.want == "" {
				got := <-answered
				if got.err != nil || got.status != http.StatusBadGateway || !strings.Contains(got.body, "bad_gateway: sandbox sb1: nothing listens on port 3000") {
					t.Fatalf("%+v, want bad_gateway", got)
				}
				if n := svc.asked.Load(); n != 1 {
					t.Errorf("Starting asked %d times, want once", n)
				}
				waitHolds(t, core, 0)
				return
			}
			time.Sleep(100 * time.Millisecond)
			select {
			case got := <-answered:
				t.Fatalf("answered before the port listened: %+v", got)
			default:
			}
			core.sb.listen(t, 3000, echo)
			if got := <-answered; got.err != nil || got.status != http.StatusOK || got.body != tt.want {
				t.Fatalf("once the port listens: %+v, want %q", got, tt.want)
			}
			waitHolds(t, core, 0)
		})
	}
}

// A request that waits for a starting service stops waiting once the
// service is no longer starting (it failed), and is answered bad_gateway
// then, not when ListenWait ends.
func TestStartingServiceFails(t *testing.T) {
	core, svc, srv, c := startingSetup(t)
	svc.starting.Store(true)
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/sb/sb1/3000/", nil)
	began := time.Now()
	answered := send(c, req)
	time.Sleep(100 * time.Millisecond)
	svc.starting.Store(false)
	got := <-answered
	if got.err != nil || got.status != http.StatusBadGateway || !strings.Contains(got.body, "nothing listens on port 3000") {
		t.Fatalf("%+v, want bad_gateway", got)
	}
	if waited := time.Since(began); waited > 2*time.Second {
		t.Errorf("answered after %v: the failed service was not noticed", waited)
	}
	waitHolds(t, core, 0)
}

// A browser's page load that waits for a starting service longer than
// WakePage gets the waking page, and its reload the app's page; a
// WebSocket (the dev server's reload channel) waits for the port.
func TestStartingServicePage(t *testing.T) {
	core, svc, srv, c := startingSetup(t)
	svc.starting.Store(true)
	page, _ := http.NewRequest(http.MethodGet, srv.URL+"/sb/sb1/3000/", nil)
	page.Header.Set("Accept", "text/html,application/xhtml+xml,*/*;q=0.8")
	status, h, body := get(t, c, page)
	if status != http.StatusOK || h.Get(HeaderPreview) != "waking" || !strings.Contains(body, `http-equiv="refresh"`) {
		t.Fatalf("the page load while the service starts: %d %v %q", status, h, body)
	}

	ctx := t.Context()
	type dialed struct {
		ws  *websocket.Conn
		err error
	}
	ws := make(chan dialed, 1)
	go func() {
		conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/sb/sb1/3000/hmr", nil)
		ws <- dialed{conn, err}
	}()
	time.Sleep(100 * time.Millisecond)
	core.sb.listen(t, 3000, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") == "" {
			echo(w, r)
			return
		}
		conn, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		_ = conn.Write(r.Context(), websocket.MessageText, []byte("hello"))
		_ = conn.Close(websocket.StatusNormalClosure, "")
	}))
	d := <-ws
	if d.err != nil {
		t.Fatalf("the WebSocket while the service starts: %v", d.err)
	}
	if _, msg, err := d.ws.Read(ctx); err != nil || string(msg) != "hello" {
		t.Errorf("the WebSocket's first message: %q, %v", msg, err)
	}
	_ = d.ws.CloseNow()
	svc.starting.Store(false) // running now
	if status, h, body := get(t, c, page); status != http.StatusOK || h.Get(HeaderPreview) != "" || body != "app / " {
		t.Errorf("the page's reload: %d %v %q", status, h, body)
	}
	waitHolds(t, core, 0)
}

// A target that does not say whether its service starts (the E2B front's,
// a screenshot's) is told by the proxy's Config.Starting, for its own
// sandbox and port: it waits as the API's targets do.
func TestStartingServiceFromConfig(t *testing.T) {
	core := &fakeCore{sb: newFakeSandbox(t)}
	var asked atomic.Int32
	starting := func(_ context.Context, sandbox string, port int) bool {
		asked.Add(1)
		return sandbox == "sb1" && port == 3000
	}
	p := New(Config{Acquire: core.acquire, WakePage: 50 * time.Millisecond, ListenWait: 5 * time.Second, Starting: starting})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := p.Serve(w, r, Target{Sandbox: "sb1", Port: 3000}); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
		}
	}))
	t.Cleanup(srv.Close)
	c := srv.Client()
	t.Cleanup(c.CloseIdleConnections)
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/page", nil)
	answered := send(c, req)
	time.Sleep(100 * time.Millisecond)
	select {
	case got := <-answered:
		t.Fatalf("answered before the port listened: %+v", got)
	default:
	}
	core.sb.listen(t, 3000, echo)
	if got := <-answered; got.err != nil || got.status != http.StatusOK || got.body != "app /page " {
		t.Fatalf("once the port listens: %+v", got)
	}
	if asked.Load() == 0 {
		t.Error("Config.Starting was never asked")
	}
	waitHolds(t, core, 0)
}
