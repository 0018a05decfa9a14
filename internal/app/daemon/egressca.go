package daemon

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/hutchdev/hutch/internal/net/mitm"
)

// systemBundle is where Debian keeps the system's trusted roots, which
// sandboxes' bundle starts with.
const systemBundle = "/etc/ssl/certs/ca-certificates.crt"

// interceptor makes the egress proxy's swapper of proxy-injected secrets:
// its CA (made in dir on first start, its key readable by the daemon
// alone), the directory sandboxes trust it from (dir/trust: the CA's
// certificate, and a bundle of it with the system's roots; no key), and
// the roots it verifies the real hosts with (the system's, and those of
// extraRoots, a PEM file the operator names, if any).
func interceptor(dir, extraRoots string, log *slog.Logger) (*mitm.Interceptor, string, error) {
	ca, err := mitm.LoadOrCreateCA(dir)
	if err != nil {
		return nil, "", fmt.Errorf("egress CA: %w", err)
	}
	trust := filepath.Join(dir, "trust")
	if err := writeTrust(trust, ca.CertPEM()); err != nil {
		return nil, "", fmt.Errorf("egress CA for sandboxes: %w", err)
	}
	roots, err := x509.SystemCertPool()
	if err != nil {
		return nil, "", fmt.Errorf("the system's roots: %w", err)
	}
	if extraRoots != "" {
		// #nosec G304 -- the operator's own file, named in the config
		pem, err := os.ReadFile(extraRoots)
		if err != nil {
			return nil, "", fmt.Errorf("egress_roots_file: %w", err)
		}
		if !roots.AppendCertsFromPEM(pem) {
			return nil, "", fmt.Errorf("egress_roots_file %s: no PEM certificate in it", extraRoots)
		}
	}
	return &mitm.Interceptor{CA: ca, RootCAs: roots, Log: log}, trust, nil
}

// writeTrust writes the CA's certificate and the bundle into dir, which
// sandboxes mount read-only (see secretenv.TrustDir).
func writeTrust(dir string, caPEM []byte) error {
	// #nosec G301 -- read by sandboxes' users through a read-only mount
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	bundle, err := os.ReadFile(systemBundle)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if len(bundle) > 0 && bundle[len(bundle)-1] != '\n' {
		bundle = append(bundle, '\n')
	}
	for name, data := range map[string][]byte{"ca.crt": caPEM, "ca-bundle.crt": append(bundle, caPEM...)} {
		tmp := filepath.Join(dir, "."+name)
		// #nosec G306 -- certificates, public: read by sandboxes' users
		if err := os.WriteFile(tmp, data, 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}
