package mitm

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestLoadOrCreateCA(t *testing.T) {
	t.Parallel()
	t.Run("made, then loaded", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(t.TempDir(), "egress-ca") // made on first use
		first, err := LoadOrCreateCA(dir)
		if err != nil {
			t.Fatal(err)
		}
		second, err := LoadOrCreateCA(dir)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first.CertPEM(), second.CertPEM()) {
			t.Error("loading again gave another CA")
		}
		wantModes := map[string]os.FileMode{certFile: 0o644, keyFile: 0o600}
		entries, _ := os.ReadDir(dir)
		if len(entries) != len(wantModes) {
			t.Errorf("files %v, want only %s and %s", entries, certFile, keyFile)
		}
		for name, mode := range wantModes {
			fi, err := os.Stat(filepath.Join(dir, name))
			if err != nil || fi.Mode().Perm() != mode {
				t.Errorf("%s: %v %v, want mode %v", name, fi.Mode(), err, mode)
			}
		}
		c := first.cert
		pub, ok := c.PublicKey.(*ecdsa.PublicKey)
		switch {
		case c.Subject.CommonName != "Hutch sandbox egress CA" || !c.IsCA || !c.BasicConstraintsValid:
			t.Errorf("subject %v CA %v", c.Subject, c.IsCA)
		case c.MaxPathLen != 0 || !c.MaxPathLenZero:
			t.Errorf("max path len %d (zero %v)", c.MaxPathLen, c.MaxPathLenZero)
		case c.KeyUsage != x509.KeyUsageCertSign|x509.KeyUsageCRLSign:
			t.Errorf("key usage %v", c.KeyUsage)
		case !ok || pub.Curve != elliptic.P256():
			t.Errorf("key %T", c.PublicKey)
		case c.NotAfter.Sub(c.NotBefore) < 10*365*24*time.Hour:
			t.Errorf("valid %v to %v", c.NotBefore, c.NotAfter)
		case c.SerialNumber.Sign() <= 0 || c.SerialNumber.BitLen() < 64:
			t.Errorf("serial %v", c.SerialNumber)
		}
	})

	// Each case breaks a made CA's directory and expects an error that
	// says so; nothing may be changed.
	tests := []struct {
		name   string
		break_ func(t *testing.T, dir string)
		want   string
	}{
		{
			name:   "key readable by others",
			break_: func(t *testing.T, dir string) { chmod(t, filepath.Join(dir, keyFile), 0o644) },
			want:   "chmod 600",
		},
		{
			name:   "key readable by group",
			break_: func(t *testing.T, dir string) { chmod(t, filepath.Join(dir, keyFile), 0o640) },
			want:   "readable by its owner only",
		},
		{
			name: "certificate and key do not match",
			break_: func(t *testing.T, dir string) {
				other := t.TempDir()
				if _, err := LoadOrCreateCA(other); err != nil {
					t.Fatal(err)
				}
				copyFile(t, filepath.Join(other, certFile), filepath.Join(dir, certFile))
			},
			want: "not for this key",
		},
		{
			name:   "certificate without its key",
			break_: func(t *testing.T, dir string) { remove(t, filepath.Join(dir, keyFile)) },
			want:   "remove",
		},
		{
			name: "certificate not PEM",
			break_: func(t *testing.T, dir string) {
				if err := os.WriteFile(filepath.Join(dir, certFile), []byte("not a certificate"), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			want: "no PEM certificate",
		},
		{
			name: "key not PEM",
			break_: func(t *testing.T, dir string) {
				if err := os.WriteFile(filepath.Join(dir, keyFile), []byte("not a key"), 0o600); err != nil {
					t.Fatal(err)
				}
			},
			want: "no PEM block",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if _, err := LoadOrCreateCA(dir); err != nil {
				t.Fatal(err)
			}
			tt.break_(t, dir)
			before := snapshot(t, dir)
			_, err := LoadOrCreateCA(dir)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one saying %q", err, tt.want)
			}
			if after := snapshot(t, dir); after != before {
				t.Errorf("the directory changed: %s, was %s", after, before)
			}
		})
	}

	t.Run("key without certificate", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		made, err := LoadOrCreateCA(dir)
		if err != nil {
			t.Fatal(err)
		}
		remove(t, filepath.Join(dir, certFile))
		again, err := LoadOrCreateCA(dir)
		if err != nil {
			t.Fatal(err)
		}
		if !again.cert.PublicKey.(*ecdsa.PublicKey).Equal(made.cert.PublicKey) {
			t.Error("the new certificate is not for the key")
		}
		loaded, err := LoadOrCreateCA(dir)
		if err != nil || !bytes.Equal(loaded.CertPEM(), again.CertPEM()) {
			t.Errorf("the new certificate was not kept: %v", err)
		}
	})
}

func TestLeaf(t *testing.T) {
	t.Parallel()
	ca := mustCA(t)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM())
	began := time.Now()

	c, err := ca.Leaf("API.test")
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := ca.Leaf("api.test"); again != c {
		t.Error("a second leaf for the same host was issued, not taken from the cache")
	}
	leaf := c.Leaf
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "api.test", Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("leaf does not verify for api.test: %v", err)
	}
	for _, other := range []string{"other.test", "x.api.test", "test"} {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: other, Roots: roots}); err == nil {
			t.Errorf("leaf for api.test verifies for %s", other)
		}
	}
	key, ok := c.PrivateKey.(*ecdsa.PrivateKey)
	switch {
	case !ok || key.Curve != elliptic.P256():
		t.Errorf("key %T", c.PrivateKey)
	case len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != "api.test" || leaf.IsCA:
		t.Errorf("names %v CA %v", leaf.DNSNames, leaf.IsCA)
	case len(leaf.ExtKeyUsage) != 1 || leaf.ExtKeyUsage[0] != x509.ExtKeyUsageServerAuth:
		t.Errorf("ext key usage %v", leaf.ExtKeyUsage)
	case leaf.NotBefore.After(began.Add(-59*time.Minute)) || leaf.NotBefore.Before(began.Add(-61*time.Minute)):
		t.Errorf("not before %v", leaf.NotBefore)
	case leaf.NotAfter.Sub(began).Round(time.Hour) != 7*24*time.Hour:
		t.Errorf("not after %v", leaf.NotAfter)
	}

	for _, bad := range []string{"", "a b", "*.api.test", "api.test."} {
		if _, err := ca.Leaf(bad); err == nil {
			t.Errorf("a leaf for %q", bad)
		}
	}
}

func TestLeafRenewedAndBounded(t *testing.T) {
	t.Parallel()
	ca := mustCA(t)
	now := time.Now()
	ca.now = func() time.Time { return now }
	c, err := ca.Leaf("api.test")
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(5 * 24 * time.Hour)
	if again, _ := ca.Leaf("api.test"); again != c {
		t.Error("renewed with two days to go")
	}
	now = now.Add(25 * time.Hour)
	renewed, err := ca.Leaf("api.test")
	if err != nil || renewed == c || !renewed.Leaf.NotAfter.After(c.Leaf.NotAfter) {
		t.Errorf("not renewed with less than a day to go: %v", err)
	}

	for i := range maxLeaves + 50 {
		if _, err := ca.Leaf("h" + strconv.Itoa(i) + ".test"); err != nil {
			t.Fatal(err)
		}
	}
	ca.mu.Lock()
	n := len(ca.leaves)
	ca.mu.Unlock()
	if n > maxLeaves {
		t.Errorf("%d leaves cached, more than %d", n, maxLeaves)
	}
}

func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func remove(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// snapshot describes dir's files: names, modes and contents.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range entries {
		fi, _ := e.Info()
		data, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		b.WriteString(e.Name() + " " + fi.Mode().String() + " " + fmt.Sprintf("%x", sha256.Sum256(data)) + "; ")
	}
	return b.String()
}
