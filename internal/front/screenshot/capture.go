package screenshot

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// Request is a screenshot of a page.
type Request struct {
	// URL is the page's.
	URL string
	// Width and Height are the browser window's, in CSS pixels (the
	// picture's pixels: the device scale is 1).
	Width, Height int
	// FullPage takes the whole page, not only the window's part of it.
	FullPage bool
	// Clip, when not nil, takes only that rectangle of the page.
	Clip *Clip
}

// Clip is a rectangle of a page, in CSS pixels from its top left corner.
type Clip struct {
	X, Y, W, H int
}

// Pages serves the requests a page makes. The browser reaches nothing
// else: the requests it does not serve fail.
type Pages interface {
	// Serves says whether the request for u is Serve's.
	Serves(u *url.URL) bool
	// Serve answers r, or returns why it answered nothing.
	Serve(w http.ResponseWriter, r *http.Request) error
}

// maxBody bounds a page's asset: it goes to the browser in one DevTools
// message.
const maxBody = 64 << 20

// Settling: after the page's load event, the screenshot waits until no
// request of the page has been answered for settleQuiet (the requests a
// script makes once loaded), at most settleMax.
const (
	settleQuiet = 300 * time.Millisecond
	settleMax   = 3 * time.Second
)

// capture takes the screenshot req asks for in the browser dial reaches,
// and returns it as PNG. Its page lives in a browser context of its own
// (no cookies or storage of another screenshot's), which goes with it.
// Every request the page makes is held at the browser (DevTools' Fetch
// domain) and answered by pages.
func capture(ctx context.Context, dial DialFunc, req Request, pages Pages) ([]byte, error) {
	c := &capturing{ctx: ctx, pages: pages, loaded: make(chan struct{}, 1), ready: make(chan struct{})}
	d, err := dialDevtools(ctx, dial, c.event)
	if err != nil {
		return nil, err
	}
	c.d = d
	close(c.ready)
	defer d.close()

	var bc struct {
		BrowserContextID string `json:"browserContextId"`
	}
	if err := d.call(ctx, "", "Target.createBrowserContext", map[string]any{"disposeOnDetach": true}, &bc); err != nil {
		return nil, err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = d.call(ctx, "", "Target.disposeBrowserContext", map[string]any{"browserContextId": bc.BrowserContextID}, nil)
	}()
	var target struct {
		TargetID string `json:"targetId"`
	}
	if err := d.call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank", "browserContextId": bc.BrowserContextID}, &target); err != nil {
		return nil, err
	}
	var attached struct {
		SessionID string `json:"sessionId"`
	}
	if err := d.call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &attached); err != nil {
		return nil, err
	}
	page := attached.SessionID
	for _, step := range []struct {
		method string
		params any
	}{
		{"Page.enable", struct{}{}},
		{"Fetch.enable", map[string]any{"patterns": []map[string]string{{"urlPattern": "*"}}}},
		{"Emulation.setDeviceMetricsOverride", map[string]any{"width": req.Width, "height": req.Height, "deviceScaleFactor": 1, "mobile": false}},
	} {
		if err := d.call(ctx, page, step.method, step.params, nil); err != nil {
			return nil, err
		}
	}

	var nav struct {
		ErrorText string `json:"errorText"`
	}
	if err := d.call(ctx, page, "Page.navigate", map[string]any{"url": req.URL}, &nav); err != nil {
		return nil, err
	}
	if nav.ErrorText != "" {
		if err := c.documentErr(); err != nil {
			return nil, err
		}
		return nil, errdefs.BadGateway("the browser could not load %s: %s", req.URL, nav.ErrorText)
	}
	select {
	case <-c.loaded:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for %s to load: %w", req.URL, ctx.Err())
	}
	c.settle(ctx)

	params := map[string]any{"format": "png"}
	clip := req.Clip
	if req.FullPage {
		var metrics struct {
			Content struct {
				Width  float64 `json:"width"`
				Height float64 `json:"height"`
			} `json:"cssContentSize"`
		}
		if err := d.call(ctx, page, "Page.getLayoutMetrics", struct{}{}, &metrics); err != nil {
			return nil, err
		}
		clip = &Clip{W: int(math.Ceil(metrics.Content.Width)), H: min(int(math.Ceil(metrics.Content.Height)), MaxSize)}
	}
	if clip != nil {
		params["clip"] = map[string]any{"x": clip.X, "y": clip.Y, "width": clip.W, "height": clip.H, "scale": 1}
		params["captureBeyondViewport"] = true
	}
	var shot struct {
		Data string `json:"data"`
	}
	if err := d.call(ctx, page, "Page.captureScreenshot", params, &shot); err != nil {
		return nil, err
	}
	return base64.StdEncoding.DecodeString(shot.Data)
}

// capturing is one capture's state, which its events change.
type capturing struct {
	ctx    context.Context
	pages  Pages
	d      *devtools
	ready  chan struct{} // closed once d is set
	loaded chan struct{} // the page's load event

	inflight atomic.Int32
	last     atomic.Int64 // when a request was last answered, in Unix ns

	mu     sync.Mutex
	docErr error // why the page's document got no answer
}

// event handles a DevTools event, on the connection's reading goroutine.
func (c *capturing) event(e event) {
	switch e.Method {
	case "Page.loadEventFired":
		select {
		case c.loaded <- struct{}{}:
		default:
		}
	case "Fetch.requestPaused":
		c.inflight.Add(1)
		go func() {
			defer c.inflight.Add(-1)
			defer c.last.Store(time.Now().UnixNano())
			<-c.ready
			c.answer(e.SessionID, e.Params)
		}()
	}
}

// settle waits until the page's requests are answered and none came for
// settleQuiet, at most settleMax.
func (c *capturing) settle(ctx context.Context) {
	deadline := time.Now().Add(settleMax)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if c.inflight.Load() == 0 && time.Since(time.Unix(0, c.last.Load())) >= settleQuiet {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *capturing) documentErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.docErr
}

// pausedRequest is a Fetch.requestPaused event's parameters.
type pausedRequest struct {
	RequestID    string `json:"requestId"`
	ResourceType string `json:"resourceType"`
	Request      struct {
		URL             string            `json:"url"`
		Method          string            `json:"method"`
		Headers         map[string]string `json:"headers"`
		PostDataEntries []struct {
			Bytes string `json:"bytes"`
		} `json:"postDataEntries"`
	} `json:"request"`
}

// answer answers a request the page made, by pages, or fails it.
func (c *capturing) answer(page string, params json.RawMessage) {
	var p pausedRequest
	if err := json.Unmarshal(params, &p); err != nil {
		return // the request stays paused; the page goes with its context
	}
	fail := func(reason string) {
		_ = c.d.call(c.ctx, page, "Fetch.failRequest", map[string]any{"requestId": p.RequestID, "errorReason": reason}, nil)
	}
	u, err := url.Parse(p.Request.URL)
	if err != nil || !c.pages.Serves(u) {
		fail("BlockedByClient")
		return
	}
	var body bytes.Buffer
	for _, entry := range p.Request.PostDataEntries {
		b, err := base64.StdEncoding.DecodeString(entry.Bytes)
		if err != nil {
			fail("Failed")
			return
		}
		body.Write(b)
	}
	r, err := http.NewRequestWithContext(c.ctx, p.Request.Method, u.String(), &body)
	if err != nil {
		fail("Failed")
		return
	}
	for k, v := range p.Request.Headers {
		r.Header.Set(k, v)
	}
	// The answer is handed to the browser as it is: not compressed,
	// which the browser would take as the body's own bytes.
	r.Header.Del("Accept-Encoding")
	r.ContentLength = int64(body.Len())
	rec := &recorder{header: http.Header{}}
	if err := c.pages.Serve(rec, r); err != nil {
		if p.ResourceType == "Document" {
			c.mu.Lock()
			c.docErr = errors.Join(c.docErr, err)
			c.mu.Unlock()
		}
		fail("ConnectionFailed")
		return
	}
	if rec.tooLarge {
		fail("Failed")
		return
	}
	headers := []map[string]string{}
	for k, vs := range rec.header {
		if strings.EqualFold(k, "Content-Length") {
			continue // the body's own length goes with it
		}
		for _, v := range vs {
			headers = append(headers, map[string]string{"name": k, "value": v})
		}
	}
	_ = c.d.call(c.ctx, page, "Fetch.fulfillRequest", map[string]any{
		"requestId": p.RequestID, "responseCode": rec.statusCode(), "responseHeaders": headers,
		"body": base64.StdEncoding.EncodeToString(rec.body.Bytes()),
	}, nil)
}

// recorder keeps an answer, up to maxBody of body.
type recorder struct {
	header   http.Header
	status   int
	body     bytes.Buffer
	tooLarge bool
}

var errTooLarge = errors.New("the answer is larger than a screenshot's page may load")

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	if r.body.Len()+len(p) > maxBody {
		r.tooLarge = true
		return 0, errTooLarge
	}
	return r.body.Write(p)
}

// Flush does nothing: the answer goes to the browser whole.
func (r *recorder) Flush() {}

func (r *recorder) statusCode() int {
	if r.status == 0 {
		return http.StatusOK
	}
	return r.status
}
