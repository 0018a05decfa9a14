package mitm

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hutchdev/hutch/internal/net/egress"
)

// The CA's files in its directory.
const (
	certFile = "ca.crt" // PEM certificate, 0644: sandboxes are given it to trust
	keyFile  = "ca.key" // PEM PKCS #8 private key, 0600: never leaves the daemon
)

// Certificates the CA makes.
const (
	caName     = "Hutch sandbox egress CA"
	caValidity = 10 * 365 * 24 * time.Hour
	// A leaf is valid from an hour ago (a sandbox's clock may lag the
	// daemon's a little) for a week, and is made anew once within a day
	// of its end.
	leafBackdate = time.Hour
	leafValidity = 7 * 24 * time.Hour
	leafRenew    = 24 * time.Hour
	// maxLeaves bounds the cache of leaves: one per host a proxy secret
	// is used on, which is few; past the bound an entry is dropped.
	maxLeaves = 1024
	// maxFile bounds what is read of ca.crt and ca.key.
	maxFile = 64 << 10
)

// CA is the daemon's own certificate authority, which issues the
// certificates the daemon presents to a sandbox in place of a host whose
// connections carry a proxy secret. Sandboxes trust it; nothing else
// should. Its methods are safe for concurrent use.
type CA struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
	now     func() time.Time // time.Now; tests move it

	mu     sync.Mutex
	leaves map[string]*tls.Certificate // by host
}

// LoadOrCreateCA loads the CA kept in dir as ca.crt and ca.key, or makes
// one there if neither file exists: an ECDSA P-256 key and a self-signed
// certificate valid for ten years that may sign leaves only (path length
// 0). Each file is written whole or not at all (a temporary file, synced,
// then renamed). A key without a certificate (a first start cut short)
// gets a new certificate.
//
// ca.key must be readable by its owner only; a key file that group or
// others may read, a certificate without a key, a pair that does not
// match, or a certificate that is not a CA or has expired is an error,
// and nothing is changed. An operator's own CA may be put there instead
// (an RSA, ECDSA or Ed25519 key, PKCS #8, SEC 1 or PKCS #1).
func LoadOrCreateCA(dir string) (*CA, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	certPath, keyPath := filepath.Join(dir, certFile), filepath.Join(dir, keyFile)
	keyPEM, keyErr := readKeyFile(keyPath)
	certPEM, certErr := readFile(certPath)
	switch {
	case errors.Is(keyErr, fs.ErrNotExist) && errors.Is(certErr, fs.ErrNotExist):
		return createCA(dir)
	case errors.Is(keyErr, fs.ErrNotExist):
		return nil, fmt.Errorf("egress CA: %s exists but %s does not; without its key the certificate is of no use: remove %s to make a new CA (sandboxes then trust the new one)", certPath, keyPath, certPath)
	case keyErr != nil:
		return nil, fmt.Errorf("egress CA: %w", keyErr)
	}
	key, err := parseKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("egress CA: %s: %w", keyPath, err)
	}
	if errors.Is(certErr, fs.ErrNotExist) {
		ca, err := newCA(key)
		if err != nil {
			return nil, err
		}
		if err := writeFileAtomic(dir, certFile, ca.certPEM, 0o644); err != nil {
			return nil, fmt.Errorf("egress CA: %w", err)
		}
		return ca, nil
	}
	if certErr != nil {
		return nil, fmt.Errorf("egress CA: %w", certErr)
	}
	cert, err := parseCert(certPEM)
	if err != nil {
		return nil, fmt.Errorf("egress CA: %s: %w", certPath, err)
	}
	if err := checkCA(cert, key, time.Now()); err != nil {
		return nil, fmt.Errorf("egress CA: %s and %s: %w", certPath, keyPath, err)
	}
	return &CA{cert: cert, key: key, certPEM: encodeCert(cert.Raw), now: time.Now}, nil
}

// CertPEM returns the CA's certificate, PEM-encoded: what a sandbox is
// given to trust.
func (ca *CA) CertPEM() []byte { return bytes.Clone(ca.certPEM) }

// Leaf returns a certificate and key for host, issued by the CA: host is
// its only name (DNS SAN), valid from an hour ago for a week, for server
// authentication, with a new ECDSA P-256 key. Leaves are cached and made
// anew within a day of their end. The result is shared: do not modify it.
func (ca *CA) Leaf(host string) (*tls.Certificate, error) {
	host = strings.ToLower(host)
	if !egress.ValidHostname(host) {
		return nil, fmt.Errorf("egress CA: leaf for %q: not a host name", clip(host))
	}
	now := ca.now()
	ca.mu.Lock()
	c := ca.leaves[host]
	ca.mu.Unlock()
	if c != nil && now.Before(c.Leaf.NotAfter.Add(-leafRenew)) {
		return c, nil
	}
	// Issued outside the lock: two callers may both issue one for the
	// same host, and either will do.
	c, err := ca.issue(host, now)
	if err != nil {
		return nil, err
	}
	ca.mu.Lock()
	defer ca.mu.Unlock()
	if _, ok := ca.leaves[host]; !ok && len(ca.leaves) >= maxLeaves {
		for h := range ca.leaves { // any one: map order is random
			delete(ca.leaves, h)
			break
		}
	}
	if ca.leaves == nil {
		ca.leaves = make(map[string]*tls.Certificate)
	}
	ca.leaves[host] = c
	return c, nil
}

// issue makes a leaf for host.
func (ca *CA) issue(host string, now time.Time) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("egress CA: leaf key: %w", err)
	}
	notAfter := now.Add(leafValidity)
	if notAfter.After(ca.cert.NotAfter) {
		notAfter = ca.cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: host},
		DNSNames:              []string{host},
		NotBefore:             now.Add(-leafBackdate),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("egress CA: leaf for %s: %w", host, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("egress CA: leaf for %s: %w", host, err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

// createCA makes a new CA and writes it into dir: the key first, so that
// a start cut short leaves at worst a key without a certificate, which
// the next start completes.
func createCA(dir string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("egress CA: key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("egress CA: key: %w", err)
	}
	ca, err := newCA(key)
	if err != nil {
		return nil, err
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	if err := writeFileAtomic(dir, keyFile, keyPEM, 0o600); err != nil {
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	if err := writeFileAtomic(dir, certFile, ca.certPEM, 0o644); err != nil {
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	return ca, nil
}

// newCA makes a self-signed CA certificate for key.
func newCA(key crypto.Signer) (*CA, error) {
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: caName, Organization: []string{"Hutch"}},
		NotBefore:             now.Add(-leafBackdate),
		NotAfter:              now.Add(caValidity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("egress CA: certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("egress CA: certificate: %w", err)
	}
	return &CA{cert: cert, key: key, certPEM: encodeCert(der), now: time.Now}, nil
}

// checkCA checks that cert is a CA certificate, valid at now, for key.
func checkCA(cert *x509.Certificate, key crypto.Signer, now time.Time) error {
	pub, ok := cert.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(key.Public()) {
		return errors.New("the certificate is not for this key (a certificate and key from different CAs?)")
	}
	if !cert.BasicConstraintsValid || !cert.IsCA {
		return errors.New("the certificate is not a CA certificate")
	}
	if cert.KeyUsage != 0 && cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return errors.New("the certificate may not sign certificates (key usage)")
	}
	if now.After(cert.NotAfter) {
		return fmt.Errorf("the certificate expired on %s: remove both files to make a new CA (sandboxes then trust the new one)", cert.NotAfter.UTC().Format(time.DateOnly))
	}
	return nil
}

// readKeyFile reads the CA's key file, refusing one that group or others
// may read, or that is not a regular file.
func readKeyFile(path string) ([]byte, error) {
	f, err := os.Open(path) // #nosec G304 -- the CA's file in the daemon's own data dir
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("%s has mode %#o: the CA's private key must be readable by its owner only (chmod 600 %s)", path, perm, path)
	}
	return readAll(f, path)
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path) // #nosec G304 -- the CA's file in the daemon's own data dir
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAll(f, path)
}

func readAll(f *os.File, path string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(f, maxFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxFile {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxFile)
	}
	return b, nil
}

// parseKey reads a private key from PEM: PKCS #8, SEC 1 (EC) or PKCS #1
// (RSA). The error never quotes the file.
func parseKey(b []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, errors.New("no PEM block")
	}
	var key any
	var err error
	switch block.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("a PEM block of type %q, not a private key", block.Type)
	}
	if err != nil {
		return nil, errors.New("the private key does not parse")
	}
	signer, ok := key.(crypto.Signer) // *ecdsa.PrivateKey, *rsa.PrivateKey, ed25519.PrivateKey
	if !ok {
		return nil, errors.New("the private key is of a kind that cannot sign")
	}
	return signer, nil
}

// parseCert reads the first certificate from PEM.
func parseCert(b []byte) (*x509.Certificate, error) {
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			return nil, errors.New("no PEM certificate")
		}
		if block.Type == "CERTIFICATE" {
			return x509.ParseCertificate(block.Bytes)
		}
	}
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// serial returns a random positive 128-bit serial number.
func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128)) // never fails (crypto/rand's contract)
	return n.Add(n, big.NewInt(1))
}

// writeFileAtomic writes data to dir/name with mode: into a temporary
// file beside it, synced, then renamed over name, and the directory
// synced, so that name is either as it was or whole.
func writeFileAtomic(dir, name string, data []byte, mode os.FileMode) (err error) {
	f, err := os.CreateTemp(dir, "."+name+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if err = f.Chmod(mode); err != nil {
		return err
	}
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return err
	}
	d, err := os.Open(dir) // #nosec G304 -- the daemon's own data dir
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// clip shortens what a caller gave to quote it in an error.
func clip(s string) string {
	const most = 100
	if len(s) <= most {
		return s
	}
	return s[:most] + "…"
}
