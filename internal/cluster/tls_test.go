package cluster

import (
	"os"
	"path/filepath"
	"testing"
)

// A node's certificate is made once, kept 0600, and the same at the next
// start (its fingerprint in the store stays right); a file that does not
// read as one is replaced.
func TestLoadIdentity(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cluster-tls.pem")
	first, err := LoadIdentity(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the certificate's file: %v, %v; want 0600", fi.Mode(), err)
	}
	again, err := LoadIdentity(path)
	if err != nil || again.Fingerprint != first.Fingerprint || len(first.Fingerprint) != 64 {
		t.Errorf("loaded again: %q, %v; want %q", again.Fingerprint, err, first.Fingerprint)
	}
	if err := os.WriteFile(path, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	remade, err := LoadIdentity(path)
	if err != nil || remade.Fingerprint == first.Fingerprint {
		t.Errorf("after the file was spoilt: %q, %v; want a new certificate", remade.Fingerprint, err)
	}
}
