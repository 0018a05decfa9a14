// Package webhooks posts a workspace's events to the URLs it registered:
// each event as JSON, signed with the webhook's secret (HMAC-SHA256 over
// the time and the body, in the Hutch-Signature header), retried with
// backoff until the receiver answers 2xx, every attempt kept in the
// webhook's delivery log. A webhook is reached as a sandbox's egress is,
// through the daemon's network (--network-netns) and under the policy of
// mode full: never the host's own, private or link-local addresses, which
// a name resolving to them does not open either; no redirects followed,
// no proxy from the environment.
//
// The events come from this daemon's log (events.Log.Subscribe): among
// nodes, each posts those of the sandboxes it holds, once.
package webhooks

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core/events"
	"github.com/hutchdev/hutch/internal/net/netpolicy"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// Headers of a delivery.
const (
	HeaderSignature = "Hutch-Signature" // t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">
	HeaderEvent     = "Hutch-Event"     // the event's type
	HeaderEventID   = "Hutch-Event-Id"
	HeaderWebhook   = "Hutch-Webhook-Id"
)

// Sign is the Hutch-Signature of body, sent at t, with secret.
func Sign(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}

// Store is where webhooks and their deliveries are kept.
type Store interface {
	CreateWebhook(ctx context.Context, w *store.Webhook) error
	ListWebhooks(ctx context.Context, ws string) ([]*store.Webhook, error)
	DeleteWebhook(ctx context.Context, ws, id string) error
	AppendDelivery(ctx context.Context, d *store.Delivery) error
	ListDeliveries(ctx context.Context, webhook string, limit int) ([]*store.Delivery, error)
}

// DefaultBackoff are the waits before each retry: seven attempts over
// about a minute.
var DefaultBackoff = []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second}

// Config configures a Service.
type Config struct {
	Store Store
	// Key is the daemon's key: the webhooks' secrets are sealed with a
	// key made from it.
	Key string
	// Dial and Lookup reach the outside as the sandboxes' egress does
	// (network.Config's).
	Dial   func(ctx context.Context, network, addr string) (net.Conn, error)
	Lookup func(ctx context.Context, network, host string) ([]netip.Addr, error)
	// Backoff are the waits before each retry (DefaultBackoff when nil).
	Backoff []time.Duration
	// Timeout bounds one attempt (10 s when 0).
	Timeout time.Duration
	// Version goes in the User-Agent.
	Version string
	Logger  *slog.Logger
}

// Service keeps the webhooks and delivers the events to them.
type Service struct {
	cfg    Config
	log    *slog.Logger
	aead   cipher.AEAD
	client *http.Client
	policy *netpolicy.Checker

	mu      sync.Mutex
	pending []*store.Event // told, not yet handed out
	wake    chan struct{}
	wg      sync.WaitGroup // deliveries under way
}

// New returns a Service; Run delivers.
func New(cfg Config) (*Service, error) {
	if cfg.Backoff == nil {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Dial == nil {
		cfg.Dial = (&net.Dialer{}).DialContext
	}
	if cfg.Lookup == nil {
		cfg.Lookup = net.DefaultResolver.LookupNetIP
	}
	sealKey := sha256.Sum256([]byte("hutch webhook secrets\x00" + cfg.Key))
	block, err := aes.NewCipher(sealKey[:])
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	policy, err := netpolicy.Compile(netpolicy.Policy{Mode: netpolicy.Full})
	if err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, log: cfg.Logger, aead: aead, policy: policy, wake: make(chan struct{}, 1)}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.client = &http.Client{
		Transport: &http.Transport{
			Proxy:                 nil, // never the environment's: the policy decides
			DialContext:           s.dial,
			TLSHandshakeTimeout:   cfg.Timeout,
			ResponseHeaderTimeout: cfg.Timeout,
			MaxIdleConnsPerHost:   2,
			IdleConnTimeout:       30 * time.Second,
		},
		Timeout: cfg.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse // a redirect is the receiver's answer, not another destination
		},
	}
	return s, nil
}

// Webhook is a registered webhook as callers see it: its secret only when
// it is made.
type Webhook struct {
	ID        string
	Workspace string
	URL       string
	Types     []string
	CreatedAt time.Time
	// Secret is set in Create's answer alone.
	Secret string
}

// maxWebhooks bounds a workspace's webhooks.
const maxWebhooks = 20

// Create registers a webhook of workspace ws posting the events of types
// (all when empty) to rawURL, signed with secret (one is made when "").
func (s *Service) Create(ctx context.Context, ws, rawURL string, types []string, secret string) (Webhook, error) {
	u, err := checkURL(rawURL)
	if err != nil {
		return Webhook{}, err
	}
	for _, t := range types {
		if !slices.Contains(events.Types, t) {
			return Webhook{}, errdefs.InvalidArgument("event type %q is none of %s", t, strings.Join(events.Types, ", "))
		}
	}
	switch {
	case secret == "":
		b := make([]byte, 24)
		if _, err := rand.Read(b); err != nil {
			return Webhook{}, err
		}
		secret = "whsec_" + hex.EncodeToString(b)
	case len(secret) < 16 || len(secret) > 256:
		return Webhook{}, errdefs.InvalidArgument("secret must be 16 to 256 characters, got %d; leave it out for one made for you", len(secret))
	}
	existing, err := s.cfg.Store.ListWebhooks(ctx, ws)
	if err != nil {
		return Webhook{}, err
	}
	if len(existing) >= maxWebhooks {
		return Webhook{}, errdefs.ResourceExhausted("workspace %s has %d webhooks, the most it may: delete one first", ws, len(existing))
	}
	id := make([]byte, 8)
	if _, err := rand.Read(id); err != nil {
		return Webhook{}, err
	}
	w := &store.Webhook{ID: "wh_" + hex.EncodeToString(id), Workspace: ws, URL: u.String(), Types: slices.Clip(types),
		CreatedAt: time.Now().UTC()}
	w.SealedSecret = s.seal([]byte(secret), w.ID)
	if err := s.cfg.Store.CreateWebhook(ctx, w); err != nil {
		return Webhook{}, err
	}
	out := viewOf(w)
	out.Secret = secret
	return out, nil
}

// List returns workspace ws's webhooks ("": every workspace's).
func (s *Service) List(ctx context.Context, ws string) ([]Webhook, error) {
	ws2, err := s.cfg.Store.ListWebhooks(ctx, ws)
	if err != nil {
		return nil, err
	}
	out := make([]Webhook, 0, len(ws2))
	for _, w := range ws2 {
		out = append(out, viewOf(w))
	}
	return out, nil
}

// Delete removes workspace ws's webhook id.
func (s *Service) Delete(ctx context.Context, ws, id string) error {
	return s.cfg.Store.DeleteWebhook(ctx, ws, id)
}

// Deliveries are webhook id's of workspace ws latest deliveries, newest
// first.
func (s *Service) Deliveries(ctx context.Context, ws, id string, limit int) ([]*store.Delivery, error) {
	if err := s.owned(ctx, ws, id); err != nil {
		return nil, err
	}
	return s.cfg.Store.ListDeliveries(ctx, id, limit)
}

// owned is nil if workspace ws has webhook id, and not found otherwise.
func (s *Service) owned(ctx context.Context, ws, id string) error {
	list, err := s.cfg.Store.ListWebhooks(ctx, ws)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(list, func(w *store.Webhook) bool { return w.ID == id }) {
		return errdefs.NotFound("webhook %s not found", id)
	}
	return nil
}

func viewOf(w *store.Webhook) Webhook {
	return Webhook{ID: w.ID, Workspace: w.Workspace, URL: w.URL, Types: w.Types, CreatedAt: w.CreatedAt}
}

// checkURL parses a webhook's URL: http or https, a host, no user.
func checkURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return nil, errdefs.InvalidArgument("url must be an http or https URL with a host, got %q", raw)
	}
	if u.User != nil {
		return nil, errdefs.InvalidArgument("url must not hold a user or password: sign with the secret instead")
	}
	if u.Fragment != "" {
		return nil, errdefs.InvalidArgument("url must not have a fragment")
	}
	if addr, err := netip.ParseAddr(strings.Trim(u.Hostname(), "[]")); err == nil && netpolicy.Inward(addr) {
		return nil, errdefs.InvalidArgument("url's host %s is an address no webhook may reach (the host's own, private or link-local)", addr)
	}
	return u, nil
}

// seal seals a webhook's secret, bound to its ID.
func (s *Service) seal(plain []byte, id string) []byte {
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return s.aead.Seal(nonce, nonce, plain, []byte(id))
}

func (s *Service) open(sealed []byte, id string) ([]byte, error) {
	n := s.aead.NonceSize()
	if len(sealed) < n {
		return nil, errors.New("sealed secret too short")
	}
	return s.aead.Open(nil, sealed[:n], sealed[n:], []byte(id))
}

// dial connects to addr if the policy lets a webhook reach it: a name is
// resolved here, and only the addresses the policy allows are dialled.
func (s *Service) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return nil, err
	}
	var addrs []netip.Addr
	name := ""
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		name = host
		if addrs, err = s.cfg.Lookup(ctx, "ip", host); err != nil {
			return nil, fmt.Errorf("resolve %s: %w", host, err)
		}
	}
	var refused []string
	for _, a := range addrs {
		if d := s.policy.Connect(name, a.Unmap(), uint16(port)); !d.Allowed {
			refused = append(refused, d.Reason)
			continue
		}
		conn, err := s.cfg.Dial(ctx, network, net.JoinHostPort(a.Unmap().String(), portText))
		if err == nil {
			return conn, nil
		}
		refused = append(refused, err.Error())
	}
	return nil, fmt.Errorf("refused by policy or unreachable: %s", strings.Join(refused, "; "))
}

// Take is what the events log tells the service (events.Log.Subscribe):
// it queues them for Run.
func (s *Service) Take(evs []*store.Event) {
	s.mu.Lock()
	s.pending = append(s.pending, evs...)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// maxInFlight bounds the deliveries under way at once, retries included.
const maxInFlight = 32

// Run delivers the events told until ctx ends, then waits for the
// deliveries under way (their retries cut short).
func (s *Service) Run(ctx context.Context) error {
	slots := make(chan struct{}, maxInFlight)
	defer s.wg.Wait()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.wake:
		}
		s.mu.Lock()
		evs := s.pending
		s.pending = nil
		s.mu.Unlock()
		hooks := map[string][]*store.Webhook{} // by workspace, read once a batch
		for _, ev := range evs {
			list, ok := hooks[ev.Workspace]
			if !ok {
				var err error
				if list, err = s.cfg.Store.ListWebhooks(ctx, ev.Workspace); err != nil {
					s.log.Error("webhooks: list, so this event is not delivered", "workspace", ev.Workspace, "event", ev.ID, "error", err)
				}
				hooks[ev.Workspace] = list
			}
			for _, w := range list {
				if len(w.Types) > 0 && !slices.Contains(w.Types, ev.Type) {
					continue
				}
				select {
				case slots <- struct{}{}:
				case <-ctx.Done():
					return nil
				}
				s.wg.Go(func() {
					defer func() { <-slots }()
					s.deliver(ctx, w, ev)
				})
			}
		}
	}
}

// Body is what a delivery posts: the event, as GET /v1/events tells it.
type Body struct {
	ID        int64             `json:"id"`
	Time      time.Time         `json:"time"`
	Type      string            `json:"type"`
	Workspace string            `json:"workspace"`
	SandboxID string            `json:"sandbox_id,omitempty"`
	Reason    string            `json:"reason,omitempty"`
	Message   string            `json:"message,omitempty"`
	Data      map[string]string `json:"data,omitempty"`
}

// BodyOf is ev as a delivery posts it.
func BodyOf(ev *store.Event) Body {
	return Body{ID: ev.ID, Time: ev.Time, Type: ev.Type, Workspace: ev.Workspace, SandboxID: ev.Sandbox, Reason: ev.Reason, Message: ev.Message, Data: ev.Data}
}

// deliver posts ev to w until it is taken or the retries are spent,
// recording each attempt.
func (s *Service) deliver(ctx context.Context, w *store.Webhook, ev *store.Event) {
	secret, err := s.open(w.SealedSecret, w.ID)
	if err != nil {
		s.log.Error("webhook's secret does not open (was the daemon's key changed?): not delivered", "webhook", w.ID, "error", err)
		return
	}
	body, err := json.Marshal(BodyOf(ev))
	if err != nil {
		return
	}
	for attempt := 1; ; attempt++ {
		began := time.Now()
		status, err := s.post(ctx, w, ev, secret, body)
		d := &store.Delivery{Webhook: w.ID, Event: ev.ID, Attempt: attempt, Time: began.UTC(), Status: status, Duration: time.Since(began)}
		if err != nil {
			d.Error = err.Error()
		}
		if rerr := s.cfg.Store.AppendDelivery(context.WithoutCancel(ctx), d); rerr != nil {
			s.log.Warn("record a webhook delivery", "webhook", w.ID, "error", rerr)
		}
		if err == nil && status >= 200 && status < 300 {
			return
		}
		if attempt > len(s.cfg.Backoff) {
			s.log.Warn("webhook delivery given up", "webhook", w.ID, "event", ev.ID, "attempts", attempt, "status", status, "error", err)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.cfg.Backoff[attempt-1]):
		}
	}
}

// post makes one attempt: the receiver's status, or why there was none.
func (s *Service) post(ctx context.Context, w *store.Webhook, ev *store.Event, secret, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "hutch-webhooks/"+s.cfg.Version)
	req.Header.Set(HeaderSignature, Sign(secret, time.Now(), body))
	req.Header.Set(HeaderEvent, ev.Type)
	req.Header.Set(HeaderEventID, strconv.FormatInt(ev.ID, 10))
	req.Header.Set(HeaderWebhook, w.ID)
	res, err := s.client.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // the URL is the webhook's, known to its owner
		}
		return 0, err
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	return res.StatusCode, nil
}
