package mitm

import (
	"encoding/base64"
	"net/http"
	"testing"
)

// A placeholder given as a basic credential's password (as git sends a
// token) is swapped inside the encoding; one written in the header as it
// is, too; a header that is not a credential is left alone.
func TestSwapBasic(t *testing.T) {
	const ph, value = "hutch-secret-TOKEN-0123456789abcdef01234567", "ghp_value-0123456789"
	enc := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	sw := newSwapper([]Swap{{Placeholder: ph, Value: value}})
	for _, c := range []struct{ header, in, want string }{
		{"Authorization", "Basic " + enc("x-access-token:"+ph), "Basic " + enc("x-access-token:"+value)},
		{"Authorization", "basic " + enc(ph+":x-oauth-basic"), "basic " + enc(value+":x-oauth-basic")},
		{"Proxy-Authorization", "Basic " + enc("u:"+ph), "Basic " + enc("u:"+value)},
		{"Authorization", "Bearer " + ph, "Bearer " + value},
		{"Authorization", "Basic " + enc("u:other"), "Basic " + enc("u:other")},
		{"Authorization", "Basic not base64!", "Basic not base64!"},
		{"X-Basic", "Basic " + enc("u:"+ph), "Basic " + enc("u:"+ph)},
	} {
		req := &http.Request{Header: http.Header{c.header: {c.in}}}
		if _, _, err := sw.request(req, "/"); err != nil {
			t.Fatal(err)
		}
		if got := req.Header.Get(c.header); got != c.want {
			t.Errorf("%s: %s became %q, want %q", c.header, c.in, got, c.want)
		}
	}
}
