package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
)

// prometheusBin is Debian's Prometheus server, which ./setup installs.
const prometheusBin = "/usr/bin/prometheus"

// TestPrometheusScrapes has a real Prometheus scrape a daemon's
// --metrics-listen with the administrator's key: after a create, an exec
// and a delete, the series say so, and no series names the sandbox.
func TestPrometheusScrapes(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat(prometheusBin); err != nil {
		t.Skipf("Prometheus is not installed (%v): ./setup --deps installs it", err)
	}
	metricsAddr := freeAddr(t)
	d := startDaemonWith(t, "--metrics-listen", metricsAddr, "--pool", "base=0")
	prom := startPrometheus(t, metricsAddr, d.key)

	sb := d.create(client.CreateSandboxRequest{Runtime: "runc"})
	if res := d.exec(sb.ID, "echo hi"); res.ExitCode != 0 || res.Stdout != "hi\n" {
		t.Fatalf("exec: %+v", res)
	}
	prom.waitValue(t, `hutch_sandboxes{state="running",runtime="runc",workspace="default"}`, 1)
	if err := d.client.DeleteSandbox(t.Context(), sb.ID); err != nil {
		t.Fatal(err)
	}
	prom.waitValue(t, `hutch_sandbox_delete_seconds_count{runtime="runc",outcome="ok"}`, 1)
	prom.waitValue(t, `up{job="hutch"}`, 1)
	prom.waitValue(t, `hutch_sandbox_create_seconds_count{runtime="runc",outcome="ok"}`, 1)
	prom.waitValue(t, `hutch_sandbox_exec_seconds_count{runtime="runc",outcome="ok"}`, 1)
	prom.waitValue(t, `hutch_api_requests_total{method="POST",route="/v1/sandboxes/{id}/exec",code="200"}`, 1)
	prom.waitValue(t, `count(hutch_sandboxes{state="running"}) or vector(0)`, 0)
	prom.waitValue(t, `go_goroutines{job="hutch"} > bool 0`, 1)

	// No label of any series names the sandbox.
	var series struct {
		Data []map[string]string `json:"data"`
	}
	prom.get(t, "/api/v1/series?"+url.Values{"match[]": {`{job="hutch"}`}}.Encode(), &series)
	if len(series.Data) < 50 {
		t.Fatalf("Prometheus has %d series of the daemon, want its metrics", len(series.Data))
	}
	for _, s := range series.Data {
		for k, v := range s {
			if strings.Contains(v, sb.ID) {
				t.Errorf("series %s has label %s=%q, the sandbox's id", s["__name__"], k, v)
			}
		}
	}
}

// prometheus is a Prometheus server a test started.
type prometheus struct {
	url string
}

// startPrometheus runs Prometheus scraping target every second with key,
// on directories and a port of its own, until the test ends.
func startPrometheus(t *testing.T, target, key string) prometheus {
	t.Helper()
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	if err := os.WriteFile(keyFile, []byte(key), 0o600); err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
scrape_configs:
  - job_name: hutch
    scrape_interval: 1s
    authorization:
      type: Bearer
      credentials_file: %s
    static_configs:
      - targets: ["%s"]
`, keyFile, target)
	configFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(configFile, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	cmd := exec.Command(prometheusBin, "--config.file="+configFile, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	logFile, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logFile.Close()
		if b, err := os.ReadFile(logFile.Name()); t.Failed() && err == nil {
			t.Logf("prometheus log:\n%s", b)
		}
	})
	p := prometheus{url: "http://" + addr}
	waitFor(t, 30*time.Second, "Prometheus to be ready", func() bool {
		res, err := http.Get(p.url + "/-/ready")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	return p
}

// get reads Prometheus's API at path into v.
func (p prometheus) get(t *testing.T, path string, v any) {
	t.Helper()
	res, err := http.Get(p.url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", path, res.Status)
	}
	if err := json.NewDecoder(res.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

// query is the value of query's one sample now, or false when it has
// none (or more than one).
func (p prometheus) query(t *testing.T, query string) (float64, bool) {
	t.Helper()
	var res struct {
		Data struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	p.get(t, "/api/v1/query?"+url.Values{"query": {query}}.Encode(), &res)
	if len(res.Data.Result) != 1 {
		return 0, false
	}
	s, _ := res.Data.Result[0].Value[1].(string)
	v, err := strconv.ParseFloat(s, 64)
	return v, err == nil
}

// waitValue waits until query's value is want, as Prometheus scraped it.
func (p prometheus) waitValue(t *testing.T, query string, want float64) {
	t.Helper()
	var got float64
	var ok bool
	deadline := time.Now().Add(30 * time.Second)
	for {
		if got, ok = p.query(t, query); ok && got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus's %s: %v (found: %v), want %v", query, got, ok, want)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
