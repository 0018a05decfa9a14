package screenshot

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// The Chrome DevTools Protocol, as much of it as a screenshot needs: JSON
// calls with ids, answered by id, and events, over a WebSocket to the
// browser. The connection is carried by the sandbox's agent (a DialFunc),
// so the browser's DevTools port listens only on the browser sandbox's
// loopback. Libraries such as chromedp dial DevTools themselves, over TCP:
// that would take a port on the host that anyone there could drive the
// browser through.

// DialFunc opens a stream to the browser's DevTools port.
type DialFunc func(ctx context.Context) (net.Conn, error)

// maxMessage bounds one DevTools message: a screenshot comes as one,
// base64 in JSON, and so does a page's asset handed to the browser.
const maxMessage = 128 << 20

// devtools is a connection to a browser's DevTools.
type devtools struct {
	ws     *websocket.Conn
	events func(event) // called on the reading goroutine: it must not block

	mu      sync.Mutex
	nextID  int64
	pending map[int64]chan message
	err     error // why the connection ended
	done    chan struct{}
}

// message is one DevTools message: a call (ID, Method, Params), its
// answer (ID, Result or Error) or an event (Method, Params). SessionID
// names the page a call or event is for.
type message struct {
	ID        int64           `json:"id,omitempty"`
	Method    string          `json:"method,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *struct {
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

type event struct {
	Method    string
	SessionID string
	Params    json.RawMessage
}

// dialDevtools connects to the browser whose DevTools port dial reaches.
// events gets every event.
func dialDevtools(ctx context.Context, dial DialFunc, events func(event)) (*devtools, error) {
	hc := &http.Client{Transport: &http.Transport{
		DialContext:       func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) },
		DisableKeepAlives: true,
	}}
	// DevTools answers only to a Host that is an IP address or localhost.
	const base = "127.0.0.1:9222"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+base+"/json/version", nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("the browser's DevTools: %w", err)
	}
	var version struct {
		WebSocketDebuggerURL string `json:"webSocketDebuggerUrl"`
	}
	err = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&version)
	_ = resp.Body.Close()
	if err != nil || version.WebSocketDebuggerURL == "" {
		return nil, fmt.Errorf("the browser's DevTools gave no WebSocket URL (HTTP %d): %v", resp.StatusCode, err)
	}
	ws, _, err := websocket.Dial(ctx, version.WebSocketDebuggerURL, &websocket.DialOptions{HTTPClient: hc})
	if err != nil {
		return nil, fmt.Errorf("the browser's DevTools WebSocket: %w", err)
	}
	ws.SetReadLimit(maxMessage)
	d := &devtools{ws: ws, events: events, pending: map[int64]chan message{}, done: make(chan struct{})}
	go d.read()
	return d, nil
}

// read passes answers to their calls and events to d.events, until the
// connection ends.
func (d *devtools) read() {
	var err error
	for {
		var data []byte
		_, data, err = d.ws.Read(context.Background())
		if err != nil {
			break
		}
		var m message
		if err = json.Unmarshal(data, &m); err != nil {
			err = fmt.Errorf("a DevTools message that is no JSON: %w", err)
			break
		}
		if m.ID == 0 {
			d.events(event{Method: m.Method, SessionID: m.SessionID, Params: m.Params})
			continue
		}
		d.mu.Lock()
		reply := d.pending[m.ID]
		delete(d.pending, m.ID)
		d.mu.Unlock()
		if reply != nil {
			reply <- m
		}
	}
	d.mu.Lock()
	d.err = err
	d.mu.Unlock()
	close(d.done)
}

// call calls method with params for session ("" for the browser) and
// decodes its result into result (unless nil).
func (d *devtools) call(ctx context.Context, session, method string, params, result any) error {
	raw, err := json.Marshal(params)
	if err != nil {
		return err
	}
	reply := make(chan message, 1)
	d.mu.Lock()
	if d.err != nil {
		d.mu.Unlock()
		return fmt.Errorf("the browser's DevTools connection ended: %w", d.err)
	}
	d.nextID++
	id := d.nextID
	d.pending[id] = reply
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		delete(d.pending, id)
		d.mu.Unlock()
	}()
	out, err := json.Marshal(message{ID: id, Method: method, Params: raw, SessionID: session})
	if err != nil {
		return err
	}
	if err := d.ws.Write(ctx, websocket.MessageText, out); err != nil {
		return fmt.Errorf("DevTools %s: %w", method, err)
	}
	select {
	case m := <-reply:
		if m.Error != nil {
			return fmt.Errorf("DevTools %s: %s", method, m.Error.Message)
		}
		if result == nil {
			return nil
		}
		return json.Unmarshal(m.Result, result)
	case <-d.done:
		return fmt.Errorf("DevTools %s: the connection ended: %w", method, d.err)
	case <-ctx.Done():
		return fmt.Errorf("DevTools %s: %w", method, ctx.Err())
	}
}

// close ends the connection, waiting a moment for the browser to see it.
func (d *devtools) close() {
	_ = d.ws.Close(websocket.StatusNormalClosure, "")
	select {
	case <-d.done:
	case <-time.After(time.Second):
	}
}
