package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// Cluster traffic is TLS with no CA to run. Each node has a self-signed
// certificate (ECDSA P-256) kept in its data dir, serves its listeners
// with it, and publishes the certificate's SHA-256 in its record in the
// store with every heartbeat. Whoever calls a node (a replica, another
// node) dials https and accepts only the certificate the store names for
// that node: the store, which already says which nodes there are and
// where, is the root of trust. Nothing is sent to a node over plain
// HTTP: a node record with an http URL or no fingerprint (a node of an
// older version) gets no calls.

// certLifetime is how long a node's certificate is valid. Its pin, not
// its dates, is what callers check; it is made again when it expires.
const certLifetime = 10 * 365 * 24 * time.Hour

// Identity is a node's certificate and its fingerprint.
type Identity struct {
	Cert tls.Certificate
	// Fingerprint is the SHA-256 of the certificate (DER), hex.
	Fingerprint string
}

// LoadIdentity reads the node's certificate and key from path (one PEM
// file, 0600), making them first when the file is absent, unreadable as
// such, or expired. Kept across restarts, so that the fingerprint in the
// store stays right while the node starts.
func LoadIdentity(path string) (Identity, error) {
	if id, err := readIdentity(path); err == nil {
		return id, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		// Made again below: a node's certificate is its own to replace.
		_ = os.Remove(path)
	}
	return makeIdentity(path)
}

func readIdentity(path string) (Identity, error) {
	// #nosec G304 -- a path in the daemon's own data dir
	b, err := os.ReadFile(path)
	if err != nil {
		return Identity{}, err
	}
	cert, err := tls.X509KeyPair(b, b)
	if err != nil {
		return Identity{}, err
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return Identity{}, err
	}
	if time.Now().After(leaf.NotAfter) {
		return Identity{}, fmt.Errorf("the certificate in %s expired on %s", path, leaf.NotAfter)
	}
	cert.Leaf = leaf
	return Identity{Cert: cert, Fingerprint: Fingerprint(cert.Certificate[0])}, nil
}

func makeIdentity(path string) (Identity, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Identity{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return Identity{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "hutch node"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(certLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return Identity{}, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Identity{}, err
	}
	b := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	b = append(b, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})...)
	tmp, err := os.CreateTemp(filepath.Dir(path), ".cluster-tls-")
	if err != nil {
		return Identity{}, fmt.Errorf("keep the node's certificate: %w", err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // gone once renamed
	_, err = tmp.Write(b)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path) // CreateTemp made it 0600
	}
	if err != nil {
		return Identity{}, fmt.Errorf("keep the node's certificate: %w", err)
	}
	return readIdentity(path)
}

// Fingerprint is the SHA-256 of a certificate (DER), hex: what a node's
// record pins.
func Fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

// ServerTLS is the TLS configuration of a node's listeners: its
// certificate, TLS 1.3, HTTP/1.1 (streams and upgrades go through as
// they do without TLS).
func (id Identity) ServerTLS() *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{id.Cert},
		MinVersion:   tls.VersionTLS13,
		NextProtos:   []string{"http/1.1"},
	}
}

// Listen wraps ln, a node's listener, in TLS with id's certificate.
func (id Identity) Listen(ln net.Listener) net.Listener {
	return tls.NewListener(ln, id.ServerTLS())
}

// pinnedTLS is the TLS configuration of a call to a node whose record
// pins fingerprint: its certificate, and no other, is accepted whatever
// it says of itself (its names, its issuer, its dates).
func pinnedTLS(fingerprint string) *tls.Config {
	want := []byte(fingerprint)
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		NextProtos: []string{"http/1.1"},
		// #nosec G402 -- no chain to verify: VerifyConnection accepts the
		// one certificate the store pins for this node, and nothing else.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the node sent no certificate")
			}
			got := []byte(Fingerprint(cs.PeerCertificates[0].Raw))
			if subtle.ConstantTimeCompare(got, want) != 1 {
				return fmt.Errorf("the node's certificate (sha256 %s) is not the one the store names for it (sha256 %s)", got, want)
			}
			return nil
		},
	}
}

// NodeTransport is how a daemon calls nodes: over TLS pinned to each
// node's fingerprint, with the cluster key (see key.go), never through a
// proxy from the environment. One connection pool per fingerprint, so
// that a connection made to one certificate serves no other.
type NodeTransport struct {
	key string

	mu     sync.Mutex
	pinned map[string]*http.Transport // by fingerprint
}

// NewNodeTransport returns a NodeTransport that sends clusterKey.
func NewNodeTransport(clusterKey string) *NodeTransport {
	return &NodeTransport{key: clusterKey, pinned: map[string]*http.Transport{}}
}

// To is the RoundTripper of calls to node n at rawURL (its URL, or its
// E2B front's): an error when the record does not let it be called
// safely (not https, or no fingerprint).
func (t *NodeTransport) To(n *store.Node, rawURL string) (*url.URL, http.RoundTripper, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return nil, nil, fmt.Errorf("node %s's URL %q: %v", n.ID, rawURL, err)
	}
	if u.Scheme != "https" || n.Fingerprint == "" {
		return nil, nil, errdefs.Unavailable("node %s gives no TLS certificate in its record (URL %s): nodes are called over pinned TLS only; upgrade it", n.ID, rawURL)
	}
	return u, pinnedRoundTripper{base: t.transport(n.Fingerprint), key: t.key}, nil
}

// transport is the pool of connections to the certificate fingerprint.
func (t *NodeTransport) transport(fingerprint string) *http.Transport {
	t.mu.Lock()
	defer t.mu.Unlock()
	if tr, ok := t.pinned[fingerprint]; ok {
		return tr
	}
	tr := &http.Transport{
		// Never through an HTTP proxy from the environment: nodes are
		// reached directly.
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     pinnedTLS(fingerprint),
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
	}
	t.pinned[fingerprint] = tr
	return tr
}

// Keep drops the pools of certificates no node in nodes has any more.
func (t *NodeTransport) Keep(nodes []*store.Node) {
	have := map[string]bool{}
	for _, n := range nodes {
		have[n.Fingerprint] = true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for fp, tr := range t.pinned {
		if !have[fp] {
			tr.CloseIdleConnections()
			delete(t.pinned, fp)
		}
	}
}

// pinnedRoundTripper sends a request on a pinned pool with the cluster
// key, which replaces any the caller sent.
type pinnedRoundTripper struct {
	base *http.Transport
	key  string
}

func (p pinnedRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "https" {
		return nil, fmt.Errorf("call a node at %s: over https only", req.URL.Redacted())
	}
	out := req.Clone(req.Context())
	out.Header.Set(HeaderClusterKey, p.key)
	return p.base.RoundTrip(out)
}
