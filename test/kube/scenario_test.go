package kube_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/test/kube/cluster"
)

// scenario is what the test does through the API Service, as a user of a
// Hutch on Kubernetes would.
type scenario struct {
	t   *testing.T
	c   *cluster.Cluster
	api *client.Client
	key string
}

// box is one sandbox of the scenario and what it should still hold.
type box struct {
	id, runtime string
	page        string // the preview's index.html
	held        string // under gVisor: the value a process holds in memory
	holderPid   uint32
}

// previewPort is where a sandbox's web server listens (busybox httpd from
// the image's userland, which sandboxes of the host template see).
const previewPort = 8080

// holder keeps a random value in its memory only, and writes it to a file
// when it gets SIGUSR1: the value comes back only if the process itself
// did (a gVisor memory checkpoint), not if it was started again.
const holder = `v=$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n'); echo "$v"; trap 'echo "$v" > /home/user/said' USR1; while :; do sleep 0.2; done`

func (s *scenario) run() {
	t := s.t
	var boxes []*box
	for _, runtime := range []string{"runc", "gvisor"} {
		b := s.create(runtime)
		boxes = append(boxes, b)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = s.api.DeleteSandbox(ctx, b.id) // best effort: the check below deletes it too
		})
		s.use(b)
	}
	gv := boxes[1]
	s.hold(gv)
	s.logSizes(boxes)
	s.suspendAndResume(gv)
	s.checkHeld(gv, "after a suspend and resume")

	s.restartNode()
	for _, b := range boxes {
		s.stillThere(b)
	}
	s.checkHeld(gv, "after the node pod was deleted and made again")

	for _, b := range boxes {
		if err := s.api.DeleteSandbox(t.Context(), b.id); err != nil {
			t.Errorf("delete %s: %v", b.id, err)
		}
	}
	list, err := s.api.ListSandboxes(t.Context())
	if err != nil || len(list) != 0 {
		t.Errorf("sandboxes after deleting them: %+v, %v", list, err)
	}
}

// create makes a sandbox of the host template (the image's userland) with
// no network out: the test needs none.
func (s *scenario) create(runtime string) *box {
	t := s.t
	began := time.Now()
	sb, err := s.api.CreateSandbox(t.Context(), client.CreateSandboxRequest{
		Template: "host", Runtime: runtime, Network: &client.NetworkPolicy{Mode: "none"},
	})
	if err != nil {
		t.Fatalf("create a %s sandbox: %v", runtime, err)
	}
	if sb.Runtime != runtime || sb.State != client.StateRunning {
		t.Fatalf("created %+v, want a running %s sandbox", sb, runtime)
	}
	t.Logf("created %s sandbox %s in %v", runtime, sb.ID, time.Since(began).Round(time.Millisecond))
	return &box{id: sb.ID, runtime: runtime, page: fmt.Sprintf("<p>%s on Kubernetes, %s</p>\n", runtime, sb.ID)}
}

func (s *scenario) exec(b *box, command string) *client.ExecResult {
	s.t.Helper()
	res, err := s.api.Exec(s.t.Context(), b.id, client.ExecRequest{Command: command, TimeoutS: 60})
	if err != nil {
		s.t.Fatalf("exec %q in %s: %v", command, b.id, err)
	}
	return res
}

// use runs a command, writes and reads a file, and serves it as a preview.
func (s *scenario) use(b *box) {
	t := s.t
	res := s.exec(b, `echo "hello from $(uname -s)"; id -u`)
	if res.ExitCode != 0 || res.Stdout != "hello from Linux\n1000\n" {
		t.Errorf("%s: exec: %+v", b.runtime, res)
	}
	if _, err := s.api.WriteFile(t.Context(), b.id, "/home/user/workspace/index.html", strings.NewReader(b.page)); err != nil {
		t.Fatalf("%s: write a file: %v", b.runtime, err)
	}
	if got := s.readFile(b, "/home/user/workspace/index.html"); got != b.page {
		t.Errorf("%s: read back %q, want %q", b.runtime, got, b.page)
	}
	if res := s.exec(b, "cat /home/user/workspace/index.html"); res.Stdout != b.page {
		t.Errorf("%s: the file seen inside: %+v", b.runtime, res)
	}
	_, err := s.api.StartProcess(t.Context(), b.id, client.StartProcessRequest{
		Name: "web", Command: fmt.Sprintf("httpd -f -p %d -h /home/user/workspace", previewPort), Port: previewPort,
	})
	if err != nil {
		t.Fatalf("%s: start a web server: %v", b.runtime, err)
	}
	s.checkPreview(b)
}

func (s *scenario) readFile(b *box, path string) string {
	rc, err := s.api.ReadFile(s.t.Context(), b.id, path)
	if err != nil {
		s.t.Fatalf("%s: read %s: %v", b.runtime, path, err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if err != nil {
		s.t.Fatal(err)
	}
	return string(got)
}

// checkPreview fetches the sandbox's page through the API's preview route.
func (s *scenario) checkPreview(b *box) {
	t := s.t
	url := fmt.Sprintf("%s/v1/sandboxes/%s/ports/%d/index.html", s.api.URL(), b.id, previewPort)
	var last string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer "+s.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			last = err.Error()
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK && string(body) == b.page {
			return
		}
		last = fmt.Sprintf("%s: %q", resp.Status, body)
	}
	t.Errorf("%s: the preview of port %d did not serve the page in 20 s: %s", b.runtime, previewPort, last)
}

// hold starts the holder process and reads the value it holds.
func (s *scenario) hold(b *box) {
	t := s.t
	p, err := s.api.StartProcess(t.Context(), b.id, client.StartProcessRequest{Name: "holder", Command: holder})
	if err != nil {
		t.Fatalf("start the holder: %v", err)
	}
	b.holderPid = p.Pid
	for deadline := time.Now().Add(20 * time.Second); b.held == ""; time.Sleep(50 * time.Millisecond) {
		var logs strings.Builder
		if err := s.api.ProcessLogs(t.Context(), b.id, "holder", false, func(ev client.ExecEvent) error {
			logs.Write(ev.Data)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		b.held = strings.TrimSpace(logs.String())
		if time.Now().After(deadline) {
			t.Fatal("the holder printed no value in 20 s")
		}
	}
}

func (s *scenario) suspendAndResume(b *box) {
	t := s.t
	began := time.Now()
	got, err := s.api.SuspendSandbox(t.Context(), b.id)
	if err != nil || got.State != client.StateSuspended {
		t.Fatalf("suspend the gvisor sandbox: %+v, %v", got, err)
	}
	suspended := time.Since(began)
	began = time.Now()
	if got, err = s.api.ResumeSandbox(t.Context(), b.id); err != nil || got.State != client.StateRunning {
		t.Fatalf("resume the gvisor sandbox: %+v, %v", got, err)
	}
	t.Logf("gvisor sandbox suspended in %v, resumed in %v", suspended.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
}

// checkHeld asks the holder for its value: the same process must answer
// with the same value.
func (s *scenario) checkHeld(b *box, when string) {
	t := s.t
	s.exec(b, "rm -f /home/user/said")
	if err := s.api.SignalProcess(t.Context(), b.id, "holder", "USR1"); err != nil {
		t.Fatalf("signal the holder %s: %v", when, err)
	}
	res := s.exec(b, `i=0; while [ ! -s /home/user/said ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; cat /home/user/said`)
	if got := strings.TrimSpace(res.Stdout); got != b.held {
		t.Errorf("the value the holder keeps in memory %s: %q, want %q (%+v)", when, got, b.held, res)
	}
	procs, err := s.api.ListProcesses(t.Context(), b.id)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		if p.Name == "holder" && (p.Pid != b.holderPid || p.Status != client.ProcessRunning) {
			t.Errorf("the holder %s: %+v, want running as pid %d", when, p, b.holderPid)
		}
	}
}

// logSizes shows what the sandboxes and Hutch's pods use, for sizing a
// node (deploy/README.md): the sandboxes' memory as Hutch counts it, and
// the pods' resident memory from their cgroups (cgroup v1's memory.stat).
func (s *scenario) logSizes(boxes []*box) {
	t := s.t
	for _, b := range boxes {
		st, err := s.api.Stats(t.Context(), b.id)
		if err != nil {
			t.Logf("%s sandbox's stats: %v", b.runtime, err)
			continue
		}
		t.Logf("size: %s sandbox (a shell, httpd, the holder): memory %.1f MiB, disk %.1f MiB", b.runtime,
			float64(st.MemoryBytes)/(1<<20), float64(st.DiskUsedBytes)/(1<<20))
	}
	out, err := s.c.Kubectl(t.Context(), "-n", "hutch", "get", "pods", "-o",
		`jsonpath={range .items[*]}{.metadata.name} {.metadata.uid} {.status.qosClass}{"\n"}{end}`)
	if err != nil {
		t.Log(err)
		return
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		dir := filepath.Join("/sys/fs/cgroup/memory", cluster.CgroupName, "kubepods", strings.ToLower(f[2]), "pod"+f[1])
		if f[2] == "Guaranteed" {
			dir = filepath.Join("/sys/fs/cgroup/memory", cluster.CgroupName, "kubepods", "pod"+f[1])
		}
		b, err := os.ReadFile(filepath.Join(dir, "memory.stat")) // #nosec G304 -- a pod's cgroup of the test's cluster
		if err != nil {
			continue // not cgroup v1
		}
		for _, stat := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(stat, "total_rss "); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				t.Logf("size: pod %s: resident memory %.1f MiB", f[0], float64(n)/(1<<20))
			}
		}
	}
}

// restartNode deletes the node daemon's pod, as an upgrade or an eviction
// would, and waits for the DaemonSet's next one to serve.
func (s *scenario) restartNode() {
	t := s.t
	began := time.Now()
	const selector = "app.kubernetes.io/component=node"
	old, err := s.c.Kubectl(t.Context(), "-n", "hutch", "get", "pods", "-l", selector, "-o", "jsonpath={.items[*].metadata.name}")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.c.Kubectl(t.Context(), "-n", "hutch", "delete", "pod", "-l", selector, "--wait=true", "--timeout=60s"); err != nil {
		t.Fatal(err)
	}
	var pod string
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		out, err := s.c.Kubectl(t.Context(), "-n", "hutch", "get", "pods", "-l", selector, "-o", "jsonpath={.items[*].metadata.name}")
		if err == nil && len(out) > 0 && string(out) != string(old) && !strings.Contains(string(out), " ") {
			pod = string(out)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new node pod 60 s after deleting %s", old)
		}
	}
	if _, err := s.c.Kubectl(t.Context(), "-n", "hutch", "wait", "--for=condition=Ready", "pod/"+pod, "--timeout=120s"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		_, err := s.api.ListSandboxes(ctx)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the API did not answer 60 s after the node pod %s was ready: %v", pod, err)
		}
	}
	t.Logf("node pod %s deleted; %s serves after %v", old, pod, time.Since(began).Round(time.Millisecond))
}

// stillThere checks a sandbox made before the node pod's restart: running,
// its file kept, commands run, and its web server still serving.
func (s *scenario) stillThere(b *box) {
	t := s.t
	sb, err := s.api.GetSandbox(t.Context(), b.id)
	if err != nil || sb.State != client.StateRunning {
		t.Fatalf("%s sandbox after the node pod's restart: %+v, %v", b.runtime, sb, err)
	}
	if got := s.readFile(b, "/home/user/workspace/index.html"); got != b.page {
		t.Errorf("%s: the file after the restart: %q, want %q", b.runtime, got, b.page)
	}
	if res := s.exec(b, "echo still here"); res.Stdout != "still here\n" {
		t.Errorf("%s: exec after the restart: %+v", b.runtime, res)
	}
	s.checkPreview(b)
}
