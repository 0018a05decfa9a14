package download

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestSignAndCheck(t *testing.T) {
	s := NewSigner("api-key")
	now := time.Unix(1_800_000_000, 0)
	claim := Claim{Sandbox: "sb1", Path: "/home/user/workspace/out.csv", Expires: now.Add(time.Hour).Unix()}
	token, err := s.Sign(claim)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Check(token, now); err != nil || got != claim {
		t.Fatalf("Check = %+v, %v; want %+v", got, err, claim)
	}
	if _, err := s.Check(token, now.Add(time.Hour)); !errors.Is(err, ErrExpired) {
		t.Errorf("at its expiry: %v, want expired", err)
	}
	// Another path, sandbox or expiry in the same signature: refused.
	payload, sig, _ := strings.Cut(token, ".")
	raw, _ := base64.RawURLEncoding.DecodeString(payload)
	for _, forged := range []string{
		strings.Replace(string(raw), "out.csv", "../../etc/shadow", 1),
		strings.Replace(string(raw), "sb1", "sb2", 1),
		strings.Replace(string(raw), `"e":18`, `"e":19`, 1),
	} {
		if forged == string(raw) {
			t.Fatalf("the forgery did not change %s", raw)
		}
		if _, err := s.Check(base64.RawURLEncoding.EncodeToString([]byte(forged))+"."+sig, now); !errors.Is(err, ErrInvalid) {
			t.Errorf("forged %s: %v, want invalid", forged, err)
		}
	}
	if _, err := NewSigner("other-key").Check(token, now); !errors.Is(err, ErrInvalid) {
		t.Errorf("another daemon's key: %v, want invalid", err)
	}
	for _, bad := range []string{"", ".", "abc", "a.b.c", token + "x"} {
		if _, err := s.Check(bad, now); !errors.Is(err, ErrInvalid) {
			t.Errorf("%q: %v, want invalid", bad, err)
		}
	}
}

// A preview link's claim keeps when it was made, which cannot be changed
// without breaking it; a token made before claims had it reads as made
// at 0.
func TestLinkIssued(t *testing.T) {
	s := NewSignerFor("api-key", "preview links")
	now := time.Unix(1_800_000_000, 0)
	claim := Claim{Sandbox: "sb1", Path: "/", Port: 8000, Service: "web", Issued: now.UnixMilli(), Expires: now.Add(time.Hour).Unix()}
	token, err := s.Sign(claim)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Check(token, now); err != nil || got != claim {
		t.Fatalf("Check = %+v, %v; want %+v", got, err, claim)
	}
	payload, sig, _ := strings.Cut(token, ".")
	raw, _ := base64.RawURLEncoding.DecodeString(payload)
	forged := strings.Replace(string(raw), `"i":18`, `"i":19`, 1)
	if forged == string(raw) {
		t.Fatalf("the forgery did not change %s", raw)
	}
	if _, err := s.Check(base64.RawURLEncoding.EncodeToString([]byte(forged))+"."+sig, now); !errors.Is(err, ErrInvalid) {
		t.Errorf("a later issue time: %v, want invalid", err)
	}

	old := claim
	old.Issued = 0
	token, err = s.Sign(old)
	if err != nil {
		t.Fatal(err)
	}
	payload, _, _ = strings.Cut(token, ".")
	if raw, _ := base64.RawURLEncoding.DecodeString(payload); strings.Contains(string(raw), `"i":`) {
		t.Errorf("a claim without an issue time has one in its token: %s", raw)
	}
	if got, err := s.Check(token, now); err != nil || got.Issued != 0 {
		t.Errorf("a link without an issue time: %+v, %v; want issued at 0", got, err)
	}
}
