package mitm

import (
	"encoding/base64"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// Issue 36, finding 13: a proxy secret's value goes only where
// credentials go, and never comes back to the sandbox.

// A placeholder is swapped in the credential headers only: written in a
// header a host may echo (User-Agent, Referer, Cookie, one of the
// client's making), it stays a placeholder, so that the sandbox cannot
// have the host hand the value back.
func TestAttackSecretOnlyInNamedHeader(t *testing.T) {
	t.Parallel()
	got := make(chan http.Header, 1)
	h := newHarness(t, config{
		handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got <- r.Header.Clone() }),
		swaps:   []Swap{{Placeholder: ph1, Value: v1}},
	})
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://"+apiHost+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	credentials := map[string]string{
		"Authorization": "Bearer " + ph1,
		"X-Api-Key":     ph1,
		"Private-Token": ph1,
	}
	others := map[string]string{
		"User-Agent": "agent/" + ph1,
		"Referer":    "https://example.org/?k=" + ph1,
		"Cookie":     "session=" + ph1,
		"X-Reflect":  ph1,
		"X-Tokens":   ph1, // not a last word Token
	}
	for k, v := range credentials {
		req.Header.Set(k, v)
	}
	for k, v := range others {
		req.Header.Set(k, v)
	}
	resp, err := h.client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	seen := <-got
	for k, v := range credentials {
		if want := strings.ReplaceAll(v, ph1, v1); seen.Get(k) != want {
			t.Errorf("%s: the host saw %q, want the value swapped in", k, seen.Get(k))
		}
	}
	for k, v := range others {
		if seen.Get(k) != v {
			t.Errorf("%s: the host saw %q, want %q (the placeholder left as it is)", k, seen.Get(k), v)
		}
	}
}

// A host that sends the value back, in a redirect, a header, a status
// line, a trailer or a body, in any encoding redaction knows, has it put
// back to the placeholder before the sandbox reads it.
func TestAttackSecretReflectedInResponse(t *testing.T) {
	t.Parallel()
	forms := []string{
		v1,
		url.QueryEscape(v1),
		base64.StdEncoding.EncodeToString([]byte(v1)),
	}
	handler := func(w http.ResponseWriter, r *http.Request) {
		value := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		w.Header().Set("Location", "https://"+apiHost+"/callback?key="+url.QueryEscape(value))
		w.Header().Set("X-Echo", value)
		w.Header().Set("X-Echo-Base64", base64.StdEncoding.EncodeToString([]byte(value)))
		body := `{"error":"invalid key ` + value + `", "escaped":"` + url.QueryEscape(value) + `"}`
		if r.URL.Path == "/length" {
			// A length the scrubbed body no longer has.
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			w.WriteHeader(http.StatusFound)
			_, _ = io.WriteString(w, body)
			return
		}
		w.Header().Set("Trailer", "X-Trailer-Echo")
		w.WriteHeader(http.StatusFound)
		// Chunked, the value cut across two chunks.
		_, _ = io.WriteString(w, body[:30])
		w.(http.Flusher).Flush()
		_, _ = io.WriteString(w, body[30:])
		w.Header().Set("X-Trailer-Echo", value)
	}
	h := newHarness(t, config{handler: http.HandlerFunc(handler), swaps: []Swap{{Placeholder: ph1, Value: v1}}})
	c := h.client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	for _, path := range []string{"/chunked", "/length"} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://"+apiHost+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+ph1)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		var everything strings.Builder
		everything.WriteString(resp.Status + "\n")
		_ = resp.Header.Write(&everything)
		_ = resp.Trailer.Write(&everything)
		everything.Write(body)
		for _, f := range forms {
			if strings.Contains(everything.String(), f) {
				t.Errorf("%s: the sandbox read the value (as %q) in:\n%s", path, f, everything.String())
			}
		}
		if loc := resp.Header.Get("Location"); loc != "https://"+apiHost+"/callback?key="+ph1 {
			t.Errorf("%s: Location %q, want the placeholder in place of the value", path, loc)
		}
		if resp.Header.Get("X-Echo") != ph1 {
			t.Errorf("%s: X-Echo %q, want the placeholder", path, resp.Header.Get("X-Echo"))
		}
		if want := `{"error":"invalid key ` + ph1 + `", "escaped":"` + ph1 + `"}`; string(body) != want {
			t.Errorf("%s: body %q, want %q", path, body, want)
		}
	}
}
