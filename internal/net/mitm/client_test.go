package mitm

import (
	"bytes"
	"crypto/sha256"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Clients other than Go's, as a sandbox runs them: curl (which offers h2
// and sends Expect: 100-continue with an upload), and OpenSSL's strict
// verification of the CA's certificates (Python 3.13 verifies strictly by
// default).

func TestCurl(t *testing.T) {
	t.Parallel()
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl is not installed")
	}
	handler := func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/upload" {
			sum := sha256.New()
			n, _ := io.Copy(sum, r.Body)
			_, _ = fmt.Fprintf(w, "%d %x %v %s", n, sum.Sum(nil), r.TransferEncoding, r.Header.Get("Expect"))
			return
		}
		echo(w, r)
	}
	h := newHarness(t, config{handler: http.HandlerFunc(handler), swaps: []Swap{{Placeholder: ph1, Value: v1}}})
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, h.hutch.CertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(h.ln.Addr().String())
	base := "https://" + apiHost + ":" + port
	run := func(stdin io.Reader, args ...string) string {
		t.Helper()
		args = append([]string{"-sS", "--max-time", "20", "--cacert", caFile, "--resolve", apiHost + ":" + port + ":127.0.0.1"}, args...)
		cmd := exec.CommandContext(t.Context(), curl, args...) // #nosec G204 -- the test's own arguments
		cmd.Stdin = stdin
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("curl %v: %v\n%s", args, err, out)
		}
		return string(out)
	}

	out := run(nil, "-w", "\n%{http_version}", "-H", "Authorization: Bearer "+ph1, base+"/v1/models")
	answer, version, _ := strings.Cut(out, "\n")
	var s seen
	if err := decodeSeen(strings.NewReader(answer), &s); err != nil || s.Auth != "Bearer "+v1 || version != "1.1" {
		t.Errorf("GET: %s: %+v, %v", out, s, err)
	}

	body := bytes.Repeat([]byte("0123456789abcdef"), 3<<16) // 3 MiB
	out = run(bytes.NewReader(body), "-T", "-", base+"/upload")
	want := fmt.Sprintf("%d %x [chunked] 100-continue", len(body), sha256.Sum256(body))
	if out != want {
		t.Errorf("upload: %q, want %q", out, want)
	}
}

func TestOpenSSLVerifiesStrictly(t *testing.T) {
	t.Parallel()
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		t.Skip("openssl is not installed")
	}
	ca := mustCA(t)
	leaf, err := ca.Leaf(apiHost)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	caFile, leafFile := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "leaf.crt")
	if err := os.WriteFile(caFile, ca.CertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(leafFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leaf.Certificate[0]}), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"verify", "-x509_strict", "-purpose", "sslserver", "-verify_hostname", apiHost, "-CAfile", caFile, leafFile}
	out, err := exec.CommandContext(t.Context(), openssl, args...).CombinedOutput() // #nosec G204 -- the test's own arguments
	if err != nil || !strings.Contains(string(out), ": OK") {
		t.Errorf("openssl %v: %v\n%s", args, err, out)
	}
}
