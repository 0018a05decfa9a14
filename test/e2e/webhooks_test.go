package e2e

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/net/nettest"
)

// receiver is a webhook's receiver on the test internet: it answers fail
// with 500 first, then 200, and keeps every delivery.
type receiver struct {
	mu   sync.Mutex
	fail int
	got  []delivery
}

type delivery struct {
	header http.Header
	body   []byte
	event  client.Event
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	var ev client.Event
	_ = json.Unmarshal(b, &ev)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, delivery{header: req.Header.Clone(), body: b, event: ev})
	if r.fail > 0 {
		r.fail--
		w.WriteHeader(http.StatusInternalServerError)
	}
}

func (r *receiver) deliveries() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// signedBy checks d's Hutch-Signature: t=<unix>,v1=<hex HMAC-SHA256 of
// "<t>.<body>"> with secret.
func (d delivery) signedBy(secret string) bool {
	sig := d.header.Get("Hutch-Signature")
	ts, v1, ok := strings.Cut(strings.TrimPrefix(sig, "t="), ",v1=")
	if !ok {
		return false
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "."))
	mac.Write(d.body)
	want := hex.EncodeToString(mac.Sum(nil))
	return hmac.Equal([]byte(v1), []byte(want))
}

// TestWebhooks registers webhooks whose receivers are hosts of the test
// internet, reached through the daemon's egress: a sandbox's life reaches
// them signed, in its events, with each end's reason (a command killed for
// memory, oom; an eviction notice before its short max lifetime ends it,
// max_lifetime), and a receiver that fails gets the retries.
func TestWebhooks(t *testing.T) {
	t.Parallel()
	if skipReason != "" {
		t.Skip(skipReason)
	}
	in := nettest.Start(t)
	main, flaky := &receiver{}, &receiver{fail: 2}
	if err := in.Serve(nettest.Hosts["allowed.test"].String()+":8080", main); err != nil {
		t.Fatal(err)
	}
	if err := in.Serve(nettest.Hosts["other.test"].String()+":8080", flaky); err != nil {
		t.Fatal(err)
	}
	d := startDaemonWith(t, "--network-netns", in.Netns, "--network-dns", in.DNS)
	ctx := t.Context()
	wh, err := d.client.CreateWebhook(ctx, client.CreateWebhookRequest{URL: "http://allowed.test:8080/hutch"})
	if err != nil {
		t.Fatal(err)
	}
	flakyWh, err := d.client.CreateWebhook(ctx, client.CreateWebhookRequest{URL: "http://other.test:8080/hutch", Events: []string{"sandbox.created"},
		Secret: "a secret of the receiver's own"})
	if err != nil {
		t.Fatal(err)
	}

	sb := d.create(client.CreateSandboxRequest{Runtime: "runc", MemoryMB: 128, MaxLifetimeS: 20})
	if res := d.exec(sb.ID, `python3 -c "b = bytearray(400 * 1024 * 1024)"`); res.KilledBy != client.KilledByOOM {
		t.Fatalf("the memory bomb: %+v, want killed_by oom", res)
	}
	if _, err := d.client.PauseSandbox(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := d.client.UnpauseSandbox(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := d.client.SuspendSandbox(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if res := d.exec(sb.ID, "true"); res.ExitCode != 0 {
		t.Fatalf("exec in the suspended sandbox: %+v", res)
	}

	want := []string{"sandbox.created created", "sandbox.eviction_notice max_lifetime", "process.exited oom", "sandbox.paused request",
		"sandbox.resumed request", "sandbox.suspended request", "sandbox.resumed woken", "sandbox.deleted max_lifetime"}
	var got []delivery
	waitFor(t, 60*time.Second, "the sandbox's life at the receiver, to its end at its max lifetime", func() bool {
		got = main.deliveries()
		return len(got) >= len(want)
	})
	slices.SortFunc(got, func(a, b delivery) int { return int(a.event.ID - b.event.ID) })
	var seen []string
	for _, dl := range got {
		seen = append(seen, dl.event.Type+" "+dl.event.Reason)
		if !dl.signedBy(wh.Secret) {
			t.Errorf("delivery of %s: signature %q does not check with the webhook's secret", dl.event.Type, dl.header.Get("Hutch-Signature"))
		}
		if dl.event.SandboxID != sb.ID || dl.header.Get("Hutch-Event") != dl.event.Type || dl.header.Get("Hutch-Webhook-Id") != wh.ID {
			t.Errorf("delivery: %+v, headers %v", dl.event, dl.header)
		}
	}
	// The notice comes at the first tick after the create, which the
	// bomb may come before or after: the order of the rest is the life's.
	if len(seen) != len(want) || !slices.Contains(seen, want[1]) ||
		!slices.Equal(slices.DeleteFunc(slices.Clone(seen), func(s string) bool { return s == want[1] }), slices.Delete(slices.Clone(want), 1, 2)) {
		t.Errorf("the receiver got:\n  %q\nwant (the notice anywhere before the end)\n  %q", seen, want)
	}

	// The flaky receiver: the create's event, after two failures.
	var tries []client.WebhookDelivery
	waitFor(t, 30*time.Second, "the flaky receiver's retries", func() bool {
		if tries, err = d.client.WebhookDeliveries(ctx, flakyWh.ID); err != nil {
			t.Fatal(err)
		}
		return len(tries) >= 3
	})
	if len(tries) != 3 || tries[2].Status != 500 || tries[1].Status != 500 || tries[0].Status != 200 || tries[0].Attempt != 3 {
		t.Errorf("the flaky receiver's deliveries, newest first: %+v", tries)
	}
	if f := flaky.deliveries(); len(f) != 3 || !f[2].signedBy("a secret of the receiver's own") || f[2].event.Type != "sandbox.created" {
		t.Errorf("the flaky receiver got %d deliveries", len(f))
	}

	// The same life through GET /v1/events.
	evs, err := d.client.ListEvents(ctx, client.EventFilter{SandboxID: sb.ID})
	if err != nil || len(evs) != len(want) {
		t.Errorf("GET /v1/events?sandbox=: %d events, %v", len(evs), err)
	}
}
