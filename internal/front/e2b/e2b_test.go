package e2b

import (
	"crypto/sha256"
	"encoding/base64"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
)

// Keys: an E2B key stands for the Hutch key of the same hex, and back.
func TestKeys(t *testing.T) {
	t.Parallel()
	if got := E2BKey("hutch_0a1b"); got != "e2b_0a1b" {
		t.Errorf("E2BKey(hutch_0a1b) = %q", got)
	}
	if got := E2BKey("other"); got != "" {
		t.Errorf("E2BKey(other) = %q, want none", got)
	}
	for in, want := range map[string]string{"e2b_0a1b": "hutch_0a1b", "hutch_0a1b": "hutch_0a1b", "x": "x"} {
		if got := hutchKey(in); got != want {
			t.Errorf("hutchKey(%q) = %q, want %q", in, got, want)
		}
	}
}

// A sandbox's tokens are stable, its own, of their kind and of the key
// they were given to, and checked as such.
func TestTokens(t *testing.T) {
	t.Parallel()
	tk, other := newTokens("hutch_key"), newTokens("hutch_other")
	alice := holder{name: "alice", made: 1}
	a := tk.token("envd", "sb1", alice)
	k := newKeyring(nil, tk)
	k.byWS, k.bySbx, k.at = map[string][]holder{"acme": {{}, alice}}, map[string]*candidates{}, time.Now() // as if listed
	cands, err := k.candidates(t.Context(), "sb1", "acme")
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case a != newTokens("hutch_key").token("envd", "sb1", alice):
		t.Error("a token changed with a new tokens of the same key")
	case a == tk.token("envd", "sb2", alice), a == tk.token("traffic", "sb1", alice), a == other.token("envd", "sb1", alice):
		t.Error("a token is another sandbox's, kind's or daemon's")
	case a == tk.token("envd", "sb1", holder{}), a == tk.token("envd", "sb1", holder{name: "alice", made: 2}), a == tk.token("envd", "sb1", holder{name: "bob", made: 1}):
		t.Error("a token is another key's, or that of a key of the same name made at another time")
	}
	if h, ok := cands.holderOf(cands.envd, a); !ok || h != alice {
		t.Errorf("holderOf(alice's token) = %v, %v", h, ok)
	}
	for name, got := range map[string]string{"none": "", "another kind's": tk.token("traffic", "sb1", alice), "a dead key's": tk.token("envd", "sb1", holder{name: "bob"})} {
		if h, ok := cands.holderOf(cands.envd, got); ok {
			t.Errorf("holderOf(%s) = %v", name, h)
		}
	}
}

// The metadata filter is decoded as E2B's API decodes what the SDK
// sends (E2B-COMPAT.md §2's example).
func TestMetadataFilter(t *testing.T) {
	t.Parallel()
	// What the SDK sends for {user: 'a b', 'k&': 'v=1'}, once the query
	// itself is decoded.
	got, err := metadataFilter("user%3Da%2520b%26k%2526%3Dv%253D1")
	if want := map[string]string{"user": "a b", "k&": "v=1"}; err != nil || !maps.Equal(got, want) {
		t.Errorf("metadataFilter = %v, %v; want %v", got, err, want)
	}
	if got, err := metadataFilter(""); err != nil || got != nil {
		t.Errorf("an empty filter: %v, %v", got, err)
	}
	if _, err := metadataFilter("%zz"); err == nil {
		t.Error("a filter that is not URL-encoded was taken")
	}
}

// E2B's network options map to Hutch's policies.
func TestNetworkPolicy(t *testing.T) {
	t.Parallel()
	no, yes := false, true
	for _, tc := range []struct {
		name     string
		internet *bool
		n        *networkConfig
		want     *client.NetworkPolicy
	}{
		{"nothing said", nil, nil, nil},
		{"internet allowed", &yes, nil, nil},
		{"no internet", &no, &networkConfig{AllowOut: []string{"x.test"}}, &client.NetworkPolicy{Mode: client.NetworkNone}},
		{"all denied", nil, &networkConfig{DenyOut: []string{"0.0.0.0/0"}}, &client.NetworkPolicy{Mode: client.NetworkNone}},
		{"all denied but some", nil, &networkConfig{DenyOut: []string{"0.0.0.0/0"}, AllowOut: []string{"api.test"}},
			&client.NetworkPolicy{Mode: client.NetworkAllowlist, Allow: []string{"api.test"}}},
		{"some denied", nil, &networkConfig{DenyOut: []string{"10.1.0.0/16"}}, &client.NetworkPolicy{Mode: client.NetworkFull, Deny: []string{"10.1.0.0/16"}}},
	} {
		if got := networkPolicy(tc.internet, tc.n); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// The front routes by E2B's headers, or by a <port>-<id>.<domain> host.
func TestFrontRoute(t *testing.T) {
	t.Parallel()
	f := &Front{cfg: FrontConfig{Domain: "localhost:49983"}}
	for _, tc := range []struct {
		host    string
		headers map[string]string
		id      string
		port    int
		ok      bool
	}{
		{host: "127.0.0.1:49983", headers: map[string]string{headerSandboxID: "abc", headerSandboxPort: "49999"}, id: "abc", port: 49999, ok: true},
		{host: "127.0.0.1:49983", headers: map[string]string{headerSandboxID: "abc"}, id: "abc", port: EnvdPort, ok: true},
		{host: "3000-abc.localhost:49983", id: "abc", port: 3000, ok: true},
		{host: "3000-ABC.LOCALHOST", id: "abc", port: 3000, ok: true},
		{host: "x.3000-abc.localhost:49983"},
		{host: "3000abc.localhost"},
		{host: "99999-abc.localhost"},
		{host: "3000-abc.example.com"},
		{host: "127.0.0.1:49983"},
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Host = tc.host
		for k, v := range tc.headers {
			r.Header.Set(k, v)
		}
		id, port, ok := f.route(r)
		if ok != tc.ok || ok && (id != tc.id || port != tc.port) {
			t.Errorf("%s %v: %q %d %v, want %q %d %v", tc.host, tc.headers, id, port, ok, tc.id, tc.port, tc.ok)
		}
	}
}

// A /files URL is signed as envd signs it: the path, the operation, the
// user and the token, and the expiry when there is one.
func TestSigned(t *testing.T) {
	t.Parallel()
	tk := newTokens("hutch_key")
	alice := holder{name: "alice", made: 1}
	cands := func(hs []holder) *candidates {
		c := &candidates{holders: hs}
		for _, h := range hs {
			c.envd = append(c.envd, tk.token("envd", "sb1", h))
		}
		return c
	}
	sign := func(path, op, user, exp string) string {
		raw := path + ":" + op + ":" + user + ":" + tk.token("envd", "sb1", alice)
		if exp != "" {
			raw += ":" + exp
		}
		sum := sha256.Sum256([]byte(raw))
		return url.QueryEscape("v1_" + base64.RawStdEncoding.EncodeToString(sum[:]))
	}
	later := strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)
	past := strconv.FormatInt(time.Now().Add(-time.Hour).Unix(), 10)
	for _, tc := range []struct {
		name, method, query string
		want                bool
	}{
		{"a read", http.MethodGet, "path=/a&signature=" + sign("/a", "read", "", ""), true},
		{"a write with a user and an expiry", http.MethodPost, "path=/a&username=user&signature_expiration=" + later + "&signature=" + sign("/a", "write", "user", later), true},
		{"a read's signature for a write", http.MethodPost, "path=/a&signature=" + sign("/a", "read", "", ""), false},
		{"another path", http.MethodGet, "path=/b&signature=" + sign("/a", "read", "", ""), false},
		{"expired", http.MethodGet, "path=/a&signature_expiration=" + past + "&signature=" + sign("/a", "read", "", past), false},
		{"no signature", http.MethodGet, "path=/a", false},
	} {
		r := httptest.NewRequest(tc.method, "/files?"+tc.query, nil)
		if h, got := signedBy(r, cands([]holder{{}, alice})); got != tc.want || got && h != alice {
			t.Errorf("%s: %v %v, want %v", tc.name, h, got, tc.want)
		}
		if _, got := signedBy(r, cands(admin)); got {
			t.Errorf("%s: taken without the key it was signed with", tc.name)
		}
	}
}
