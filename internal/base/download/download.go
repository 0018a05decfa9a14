// Package download signs and checks the URLs that let someone without the
// API key download one file or directory of one sandbox until a time: the
// sandbox, the path and the expiry are in the URL's token, with an HMAC
// over them, so that changing any of them breaks it.
package download

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"time"
)

// Claim is what a download URL allows.
type Claim struct {
	Sandbox string `json:"s"`
	Path    string `json:"p"`
	// Dir: the path is a directory, sent packed as Format.
	Dir     bool   `json:"d,omitempty"`
	Format  string `json:"f,omitempty"`
	Expires int64  `json:"e"` // Unix seconds
	// Port is a preview link's: the sandbox's port it opens (Path is then
	// the path it opens first); Service, the service it was made for,
	// which must still be the one on Port; Issued, when it was made (Unix
	// milliseconds; 0 in links made before links had it), which revoking
	// the service's links compares with.
	Port    int    `json:"o,omitempty"`
	Service string `json:"v,omitempty"`
	Issued  int64  `json:"i,omitempty"`
}

// Signer signs and checks claims with one key.
type Signer struct{ key []byte }

// NewSigner returns a Signer of download URLs whose key is derived from
// secret (the API key): URLs stop working when it changes.
func NewSigner(secret string) *Signer { return NewSignerFor(secret, "download URLs") }

// NewSignerFor returns a Signer for one purpose ("preview links"), its
// key derived from secret and the purpose: a token signed for one
// purpose is invalid for every other.
func NewSignerFor(secret, purpose string) *Signer {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte("hutch " + purpose))
	return &Signer{key: mac.Sum(nil)}
}

// Sign returns the token of c.
func (s *Signer) Sign(c Claim) (string, error) {
	payload, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	enc := base64.RawURLEncoding
	return enc.EncodeToString(payload) + "." + enc.EncodeToString(s.mac(payload)), nil
}

// Errors of Check.
var (
	ErrInvalid = errors.New("the download URL is not valid")
	ErrExpired = errors.New("the download URL has expired; ask for a new one")
)

// Check returns the claim of token if it is genuine and not expired at now.
func (s *Signer) Check(token string, now time.Time) (Claim, error) {
	enc := base64.RawURLEncoding
	p, sig, ok := strings.Cut(token, ".")
	payload, err1 := enc.DecodeString(p)
	mac, err2 := enc.DecodeString(sig)
	if !ok || err1 != nil || err2 != nil || !hmac.Equal(mac, s.mac(payload)) {
		return Claim{}, ErrInvalid
	}
	var c Claim
	if err := json.Unmarshal(payload, &c); err != nil || c.Sandbox == "" || c.Path == "" {
		return Claim{}, ErrInvalid
	}
	if now.Unix() >= c.Expires {
		return Claim{}, ErrExpired
	}
	return c, nil
}

func (s *Signer) mac(payload []byte) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write(payload)
	return m.Sum(nil)
}
