package secrets

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/hutchdev/hutch/internal/storage/store"
)

// keySize is a master key's length: AES-256.
const keySize = 32

// The key check: a known constant sealed under the master key, stored
// beside the secrets, so that a wrong key is told at start even when there
// is no secret yet.
var (
	checkPlain = []byte("hutch vault key check v1")
	checkAD    = []byte("hutch-vault-check-v1")
)

// errNoOpen is what opening a sealed value under another key, or with
// other associated data, gives.
var errNoOpen = errors.New("it does not open under the master key")

// sealer seals and opens values under one master key with AES-256-GCM.
// Each seal draws a fresh random 12-byte nonce, which leads the sealed
// bytes (cipher.NewGCMWithRandomNonce: nonce, ciphertext, tag). A random
// 96-bit nonce stays safe for far more seals than a vault will ever make
// under one key (NIST's bound is 2^32).
type sealer struct {
	aead cipher.AEAD
}

func newSealer(key []byte) (*sealer, error) {
	if len(key) != keySize {
		return nil, fmt.Errorf("master key of %d bytes, want %d", len(key), keySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCMWithRandomNonce(block)
	if err != nil {
		return nil, err
	}
	return &sealer{aead: aead}, nil
}

func (s *sealer) seal(plain, ad []byte) []byte {
	return s.aead.Seal(nil, nil, plain, ad)
}

func (s *sealer) open(sealed, ad []byte) ([]byte, error) {
	if len(sealed) < s.aead.Overhead() {
		return nil, errNoOpen
	}
	plain, err := s.aead.Open(nil, nil, sealed, ad)
	if err != nil {
		return nil, errNoOpen
	}
	return plain, nil
}

func (s *sealer) sealCheck() []byte { return s.seal(checkPlain, checkAD) }

// opensCheck reports whether check was sealed under s's key.
func (s *sealer) opensCheck(check []byte) bool {
	plain, err := s.open(check, checkAD)
	return err == nil && string(plain) == string(checkPlain)
}

// secretAD is the associated data a secret's value is sealed with: its
// workspace, scope, user and name, and how it is injected and where, each
// length-prefixed, so that no two secrets share it. A sealed value copied
// into another row does not open; nor does one whose row was edited to
// send a proxy secret to other hosts, or to put it in the environment.
func secretAD(s *store.Secret) []byte {
	b := []byte("hutch-secret-v1")
	// #nosec G115 -- the length of a name, an id or a host: never near 2^32
	field := func(v string) {
		b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
		b = append(b, v...)
	}
	field(s.Workspace)
	field(scopeOf(s.User))
	field(s.User)
	field(s.Name)
	field(s.Inject)
	b = binary.BigEndian.AppendUint32(b, uint32(len(s.Hosts))) // #nosec G115 -- at most MaxHosts
	for _, h := range s.Hosts {
		field(h)
	}
	if s.Query {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	return b
}
