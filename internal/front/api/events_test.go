package api

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
)

// eventsOf lists the events k sees at path, waiting until there are n.
func eventsOf(t *testing.T, k keyed, path string, n int) []client.Event {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		status, body := k.raw(t, http.MethodGet, path, "")
		var out client.Events
		if status != http.StatusOK || json.Unmarshal([]byte(body), &out) != nil {
			t.Fatalf("GET %s: %d %s", path, status, body)
		}
		if len(out.Events) >= n || time.Now().After(deadline) {
			return out.Events
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A sandbox's lifecycle is its workspace's events, with each end's
// reason and who did it; another workspace's key sees none of them, nor
// its webhooks.
func TestAttackEventsAcrossWorkspaces(t *testing.T) {
	t.Parallel()
	requireFakeAgent(t)
	s := newTestServer(t)
	ctx := t.Context()
	acme, other := s.keyIn(t, "acme-key", "acme"), s.keyIn(t, "other-key", "other")
	sb, err := acme.CreateSandbox(ctx, client.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := acme.PauseSandbox(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if err := acme.DeleteSandbox(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	evs := eventsOf(t, acme, "/v1/events", 3)
	var got []string
	for _, ev := range evs {
		got = append(got, ev.Type+" "+ev.Reason)
		if ev.SandboxID != sb.ID || ev.Workspace != "acme" {
			t.Errorf("acme's event: %+v", ev)
		}
	}
	if strings.Join(got, ", ") != "sandbox.created created, sandbox.paused request, sandbox.deleted deleted" {
		t.Errorf("acme's events: %q", got)
	}
	if last := evs[len(evs)-1]; last.Message != "deleted (by key acme-key)" {
		t.Errorf("the delete's message: %q", last.Message)
	}
	for _, path := range []string{"/v1/events", "/v1/events?workspace=acme"} {
		if evs := eventsOf(t, other, path, 0); len(evs) != 0 {
			t.Errorf("other's key at %s sees %+v", path, evs)
		}
	}
	if evs := eventsOf(t, other, "/v1/events?sandbox="+sb.ID, 0); len(evs) != 0 {
		t.Errorf("other's key, acme's sandbox's events: %+v", evs)
	}
	if evs := eventsOf(t, s.admin(), "/v1/events?workspace=acme&after="+strconv.FormatInt(evs[0].ID, 10), 2); len(evs) != 2 {
		t.Errorf("the administrator's, after the first: %+v", evs)
	}

	// A stream that comes back with Last-Event-ID goes on after it.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+acme.key)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", strconv.FormatInt(evs[1].ID, 10))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	lines := bufio.NewScanner(res.Body)
	var head []string
	for len(head) < 3 && lines.Scan() {
		head = append(head, lines.Text())
	}
	if want := []string{"id: " + strconv.FormatInt(evs[2].ID, 10), "event: sandbox.deleted"}; len(head) < 3 || head[0] != want[0] || head[1] != want[1] ||
		!strings.HasPrefix(head[2], "data: {") {
		t.Errorf("the stream after event %d: %q, want %q and its data", evs[1].ID, head, want)
	}

	// Webhooks are the workspace's.
	status, body := acme.raw(t, http.MethodPost, "/v1/webhooks", `{"url":"https://hooks.example.com/hutch","events":["sandbox.deleted"]}`)
	var wh client.Webhook
	if status != http.StatusCreated || json.Unmarshal([]byte(body), &wh) != nil || !strings.HasPrefix(wh.Secret, "whsec_") || wh.Workspace != "acme" {
		t.Fatalf("acme's webhook: %d %s", status, body)
	}
	if status, body := acme.raw(t, http.MethodGet, "/v1/webhooks", ""); status != http.StatusOK || !strings.Contains(body, wh.ID) || strings.Contains(body, wh.Secret) {
		t.Errorf("acme's webhooks: %d %s (with no secret)", status, body)
	}
	if status, body := other.raw(t, http.MethodGet, "/v1/webhooks", ""); status != http.StatusOK || strings.Contains(body, wh.ID) {
		t.Errorf("other's webhooks: %d %s", status, body)
	}
	for _, call := range []struct{ method, path string }{{http.MethodDelete, "/v1/webhooks/" + wh.ID}, {http.MethodGet, "/v1/webhooks/" + wh.ID + "/deliveries"}} {
		if status, body := other.raw(t, call.method, call.path, ""); status != http.StatusNotFound {
			t.Errorf("other's key, %s %s: %d %s", call.method, call.path, status, body)
		}
	}
	for _, bad := range []string{`{"url":"http://127.0.0.1:7070/"}`, `{"url":"https://hooks.example.com/","events":["sandbox.exploded"]}`, `{"url":"https://hooks.example.com/","secret":"short"}`} {
		if status, body := acme.raw(t, http.MethodPost, "/v1/webhooks", bad); status != http.StatusBadRequest || !strings.Contains(body, "invalid_argument") {
			t.Errorf("POST /v1/webhooks %s: %d %s, want 400", bad, status, body)
		}
	}
	if status, body := acme.raw(t, http.MethodDelete, "/v1/webhooks/"+wh.ID, ""); status != http.StatusNoContent {
		t.Errorf("acme deleting its webhook: %d %s", status, body)
	}
}
