package e2e

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha1" // #nosec G505 -- npm's shasum field is SHA-1; integrity carries SHA-512
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/net/nettest"
)

// The test internet's package registries: a Python package index and an
// npm registry, each serving one package of the test's making.
const (
	pypiHost = "allowed.test:8080"
	npmHost  = "cdn.test:8081"
)

// TestNetworkLearn installs a package with pip and one with npm in a
// sandbox in network mode learn, from registries on the test internet;
// its proposal, set on a new sandbox in mode allowlist, lets the same
// installs through and refuses a host it did not reach; the network log
// shows both decisions with their rules, and the sandbox reads the refusal
// in its refusals file.
func TestNetworkLearn(t *testing.T) {
	t.Parallel()
	if skipReason != "" {
		t.Skip(skipReason)
	}
	if _, err := os.Stat("/usr/lib/python3/dist-packages/pip"); err != nil {
		t.Skip("Debian's pip is not installed (./setup --deps installs python3-pip)")
	}
	in := nettest.Start(t)
	if err := in.Serve(nettest.Hosts["allowed.test"].String()+":8080", pypiIndex(t)); err != nil {
		t.Fatal(err)
	}
	if err := in.Serve(nettest.Hosts["cdn.test"].String()+":8081", npmRegistry(t)); err != nil {
		t.Fatal(err)
	}
	d := startDaemonWith(t, "--network-netns", in.Netns, "--network-dns", in.DNS)
	ctx := t.Context()
	install := func(id string) {
		t.Helper()
		pip := d.exec(id, "python3 -m pip install --quiet --disable-pip-version-check --no-cache-dir --break-system-packages "+
			"--index-url http://"+pypiHost+"/simple/ --trusted-host allowed.test --target /tmp/py hutchdemo && "+
			"PYTHONPATH=/tmp/py python3 -c 'import hutchdemo; print(hutchdemo.VALUE)'")
		if pip.ExitCode != 0 || !strings.HasSuffix(pip.Stdout, "42\n") {
			t.Fatalf("pip install: %+v", pip)
		}
		npm := d.exec(id, "mkdir -p /tmp/js && cd /tmp/js && npm install --silent --no-audit --no-fund --no-update-notifier "+
			"--registry http://"+npmHost+"/ hutch-demo && node -e 'console.log(require(\"hutch-demo\").value)'")
		if npm.ExitCode != 0 || !strings.HasSuffix(npm.Stdout, "43\n") {
			t.Fatalf("npm install: %+v", npm)
		}
	}

	learner := d.create(client.CreateSandboxRequest{Runtime: "runc", Network: &client.NetworkPolicy{Mode: "learn"}})
	install(learner.ID)
	proposal, err := d.client.NetworkProposal(ctx, learner.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{pypiHost, npmHost}; proposal.Mode != "allowlist" || !slices.Equal(proposal.Allow, want) {
		t.Fatalf("the proposal: %+v, want allowlist %q", proposal, want)
	}

	strict := d.create(client.CreateSandboxRequest{Runtime: "runc", Network: proposal})
	install(strict.ID)
	// Refused at its lookup: curl cannot resolve the name (6).
	if refused := d.exec(strict.ID, "curl -s --max-time 10 http://other.test/"); refused.ExitCode != 6 {
		t.Errorf("curl to other.test under the proposal: %+v, want refused", refused)
	}
	var file *client.ExecResult
	waitFor(t, 10*time.Second, "the refusal in the sandbox's refusals file", func() bool {
		file = d.exec(strict.ID, "cat /var/log/hutch/network-refusals.log 2>&1")
		return strings.Contains(file.Stdout, "blocked_by_policy: other.test")
	})
	log, err := d.client.NetworkLog(ctx, strict.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var allowed, denied bool
	for _, e := range log.Entries {
		switch {
		case e.Kind == "tcp" && e.Name == "cdn.test" && e.Port == 8081 && e.Allowed && e.Rule == npmHost && e.BytesIn > 0:
			allowed = true
		case e.Name == "other.test" && !e.Allowed && e.Rule == "mode" && strings.Contains(e.Reason, "not in the allow-list"):
			denied = true
		}
	}
	if !allowed || !denied {
		t.Errorf("the log shows the registry allowed by its rule (%t) and other.test refused by the mode (%t): %+v", allowed, denied, log.Entries)
	}
}

// pypiIndex is a simple package index (PEP 503) of one wheel, hutchdemo 1.0,
// whose module holds VALUE = 42.
func pypiIndex(t *testing.T) http.Handler {
	files := map[string]string{
		"hutchdemo/__init__.py":                 "VALUE = 42\n",
		"hutchdemo-1.0.dist-info/METADATA":      "Metadata-Version: 2.1\nName: hutchdemo\nVersion: 1.0\n",
		"hutchdemo-1.0.dist-info/WHEEL":         "Wheel-Version: 1.0\nGenerator: hutch-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
		"hutchdemo-1.0.dist-info/top_level.txt": "hutchdemo\n",
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	var record strings.Builder
	for _, name := range []string{"hutchdemo/__init__.py", "hutchdemo-1.0.dist-info/METADATA", "hutchdemo-1.0.dist-info/WHEEL", "hutchdemo-1.0.dist-info/top_level.txt"} {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = w.Write([]byte(files[name]))
		sum := sha256.Sum256([]byte(files[name]))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", name, base64.RawURLEncoding.EncodeToString(sum[:]), len(files[name]))
	}
	record.WriteString("hutchdemo-1.0.dist-info/RECORD,,\n")
	w, err := zw.Create("hutchdemo-1.0.dist-info/RECORD")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = w.Write([]byte(record.String()))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	wheel := buf.Bytes()
	sum := sha256.Sum256(wheel)
	const name = "hutchdemo-1.0-py3-none-any.whl"
	mux := http.NewServeMux()
	mux.HandleFunc("GET /simple/hutchdemo/", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "<!DOCTYPE html><html><body><a href=\"/files/%s#sha256=%s\">%s</a></body></html>\n", name, hex.EncodeToString(sum[:]), name)
	})
	mux.HandleFunc("GET /files/"+name, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(wheel) })
	return mux
}

// npmRegistry is an npm registry of one package, hutch-demo 1.0.0, which
// exports {value: 43}.
func npmRegistry(t *testing.T) http.Handler {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, body := range map[string]string{
		"package/package.json": `{"name":"hutch-demo","version":"1.0.0","main":"index.js"}`,
		"package/index.js":     "module.exports = { value: 43 };\n",
	} {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		_, _ = tw.Write([]byte(body))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	tgz := buf.Bytes()
	sha1sum := sha1.Sum(tgz) // #nosec G401 -- npm's shasum field
	sha512sum := sha512.Sum512(tgz)
	tarball := "http://" + npmHost + "/hutch-demo/-/hutch-demo-1.0.0.tgz"
	meta, err := json.Marshal(map[string]any{
		"name": "hutch-demo", "dist-tags": map[string]string{"latest": "1.0.0"},
		"versions": map[string]any{"1.0.0": map[string]any{
			"name": "hutch-demo", "version": "1.0.0", "main": "index.js",
			"dist": map[string]string{"tarball": tarball, "shasum": hex.EncodeToString(sha1sum[:]),
				"integrity": "sha512-" + base64.StdEncoding.EncodeToString(sha512sum[:])},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hutch-demo", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(meta)
	})
	mux.HandleFunc("GET /hutch-demo/-/hutch-demo-1.0.0.tgz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(tgz) })
	return mux
}
