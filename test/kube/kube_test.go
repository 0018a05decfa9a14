// Package kube_test deploys Hutch on a real single-node Kubernetes, as a
// user would (kubectl apply -k of deploy/ under an overlay that names the
// image, the Secret and the host paths), and drives it through the API
// Service: sandboxes under runc and gVisor, exec, files, a preview, a
// suspend and resume that keeps a gVisor sandbox's memory, and the node
// pod deleted (a restart, an upgrade) with its sandboxes still there and
// usable afterwards.
//
// It runs with make test-kube, which builds the cluster's binaries (once
// per machine: test/kube/build-cluster.sh) and the image (make image),
// and sets HUTCH_KUBE=1; go test ./... skips it.
package kube_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/test/kube/cluster"
)

// nodePort is where the node daemons serve on the node's address: not
// 7070, which a Hutch on the machine itself may hold on the loopback.
const nodePort = 27070

// postgresPort is the test's database's, on the node's address.
const postgresPort = 25432

// timings are the parts' durations, printed at the end.
type timings struct {
	t     *testing.T
	parts []cluster.Timing
}

func (tm *timings) add(part string, began time.Time) {
	tm.parts = append(tm.parts, cluster.Timing{Part: part, Took: time.Since(began)})
	tm.t.Logf("kube: %s took %.1f s", part, time.Since(began).Seconds())
}

func (tm *timings) print() {
	var b strings.Builder
	for _, p := range tm.parts {
		fmt.Fprintf(&b, "  %-34s %6.1f s\n", p.Part, p.Took.Seconds())
	}
	tm.t.Logf("kube: the parts' times:\n%s", b.String())
}

func TestKube(t *testing.T) {
	if os.Getenv("HUTCH_KUBE") == "" {
		t.Skip("the Kubernetes test runs with make test-kube (HUTCH_KUBE=1)")
	}
	env := prerequisites(t)
	tm := &timings{t: t}
	// The test's own ports on the node's address (the cluster checks its).
	if err := cluster.PortsFree("0.0.0.0", nodePort, postgresPort); err != nil {
		t.Fatal(err)
	}
	// The cluster's directory: Down removes it.
	dir, err := os.MkdirTemp("", "hutch-kube-")
	if err != nil {
		t.Fatal(err)
	}
	// Searchable: the postgres user reaches its files below it.
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}

	began := time.Now()
	pause := pauseImage(t, t.TempDir())
	c, err := cluster.Up(t.Context(), cluster.Config{
		Bin: env.bin, Dir: dir, Runc: env.runc, Runsc: env.runsc, Images: []string{pause}, Logf: t.Logf,
	})
	if err != nil {
		t.Fatalf("cluster up: %v", err)
	}
	tm.add("cluster up", began)
	for _, p := range c.Timings {
		t.Logf("kube:   %s: %.1f s", p.Part, p.Took.Seconds())
	}
	var pg *postgres // stopped after the pods, which use it
	t.Cleanup(func() {
		began := time.Now()
		if t.Failed() {
			for _, n := range []string{"kubelet", "containerd"} {
				t.Log(c.LogTail(n))
			}
			logPods(t, c)
		}
		// The pods stop as they would on a real node (Down kills what
		// is left). Not the namespace: its controller takes seconds more
		// to notice, and the cluster goes anyway.
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		if _, err := c.Kubectl(ctx, "-n", "hutch", "delete", "daemonset,deployment", "--all", "--timeout=60s"); err != nil {
			t.Log(err)
		}
		if _, err := c.Kubectl(ctx, "-n", "hutch", "wait", "--for=delete", "pod", "--all", "--timeout=60s"); err != nil {
			t.Log(err)
		}
		if pg != nil {
			pg.stop()
		}
		tm.add("teardown: pods stopped", began)
		began = time.Now()
		if err := c.Down(); err != nil {
			t.Errorf("teardown: %v", err)
		}
		tm.add("teardown: cluster down", began)
		tm.print()
	})
	nodeData, nodeRun := filepath.Join(dir, "node", "data"), filepath.Join(dir, "node", "run")
	if err := c.AddSandboxRoots(nodeData, nodeRun); err != nil {
		t.Fatal(err)
	}
	if err := c.AddCgroups("hutch-daemons"); err != nil {
		t.Fatal(err)
	}

	began = time.Now()
	if err := c.Import(t.Context(), env.image); err != nil {
		t.Fatal(err)
	}
	tm.add("image import", began)

	began = time.Now()
	pg = startPostgres(t, filepath.Join(dir, "postgres"), cluster.NodeIP, postgresPort)
	key := "hutch_" + randomHex(32)
	master := make([]byte, 32)
	rand.Read(master)
	o := overlay{
		Dir: filepath.Join(dir, "overlay"), Deploy: env.deploy, Image: env.imageRef,
		APIKey: key, MasterKey: base64.StdEncoding.EncodeToString(master),
		Store: pg.URL, PostgresPassword: pg.Password,
		NodeData: nodeData, NodeRun: nodeRun,
	}
	if err := o.write(); err != nil {
		t.Fatal(err)
	}
	rendered, err := c.Kubectl(t.Context(), "kustomize", o.Dir)
	if err != nil {
		t.Fatal(err)
	}
	checkRendered(t, string(rendered), nodeData, nodeRun)
	if _, err := c.Kubectl(t.Context(), "apply", "-k", o.Dir); err != nil {
		t.Fatal(err)
	}
	waitRollout(t, c)
	api := apiClient(t, c, key)
	tm.add("apply (until the API answers)", began)

	began = time.Now()
	s := &scenario{t: t, c: c, api: api, key: key}
	s.run()
	tm.add("checks", began)
}

// env is what the test runs with.
type env struct {
	bin      string // the cluster's binaries
	image    string // Hutch's image, a docker-archive tarball
	imageRef string // its name in the tarball
	runc     string
	runsc    string
	deploy   string // the repository's deploy/
}

// prerequisites finds what the test needs, or skips saying what is
// missing.
func prerequisites(t *testing.T) env {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: it runs a kubelet and containerd")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	e := env{bin: os.Getenv("HUTCH_KUBE_BIN"), image: os.Getenv("HUTCH_KUBE_IMAGE"), deploy: filepath.Join(root, "deploy"),
		runsc: filepath.Join(root, "bin", "runsc")}
	if e.bin == "" || e.image == "" {
		t.Skip("HUTCH_KUBE_BIN (the cluster's binaries) and HUTCH_KUBE_IMAGE (Hutch's image) are set by make test-kube")
	}
	for _, tool := range []string{"runc", "nft", "unshare", "nsenter", "ip", "setpriv", "losetup"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Skipf("needs %s in PATH (make test-kube installs nftables; ./setup the rest)", tool)
		}
		if tool == "runc" {
			e.runc = p
		}
	}
	if _, err := os.Stat(e.runsc); err != nil {
		t.Skip("needs gVisor's runsc (make runsc)")
	}
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(e.image) })
	if err != nil || len(m) != 1 || len(m[0].RepoTags) != 1 {
		t.Fatalf("image %s: %v (want one image with one tag)", e.image, err)
	}
	e.imageRef = m[0].RepoTags[0]
	return e
}

// pauseImage builds the pods' sandbox image: the pause program, static,
// as the only layer.
func pauseImage(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "pause")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./pause")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build pause: %v: %s", err, out)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return singleFileTar(bin, "pause")
	})
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		t.Fatal(err)
	}
	img, err = mutate.Config(img, v1.Config{Entrypoint: []string{"/pause"}})
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf.OS, cf.Architecture = "linux", "amd64"
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(cluster.PauseImage)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "pause.tar")
	if err := tarball.WriteToFile(out, tag, img); err != nil {
		t.Fatal(err)
	}
	return out
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// checkRendered refuses manifests that would touch the machine's own
// Hutch: every host path of the node daemon must be the test's.
func checkRendered(t *testing.T, rendered, data, run string) {
	t.Helper()
	for _, forbidden := range []string{"path: /var/lib/hutch\n", "path: /run/hutch\n"} {
		if strings.Contains(rendered, forbidden) {
			t.Fatalf("the overlay left a host path of the machine's own Hutch (%s) in the manifests:\n%s", strings.TrimSpace(forbidden), rendered)
		}
	}
	for _, want := range []string{"path: " + data + "\n", "path: " + run + "\n"} {
		if !strings.Contains(rendered, want) {
			t.Fatalf("the node's host paths are not the test's (%s):\n%s", strings.TrimSpace(want), rendered)
		}
	}
}

// waitRollout waits until the node DaemonSet and the API Deployment are
// ready.
func waitRollout(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	for _, target := range []string{"daemonset/hutch-node", "deployment/hutch-api"} {
		if _, err := c.Kubectl(t.Context(), "-n", "hutch", "rollout", "status", target, "--timeout=180s"); err != nil {
			out, _ := c.Kubectl(context.Background(), "-n", "hutch", "get", "pods", "-o", "wide")
			desc, _ := c.Kubectl(context.Background(), "-n", "hutch", "describe", "pods")
			t.Fatalf("%v\n%s\n%s", err, out, desc)
		}
	}
}

// apiClient is a client of the API Service's address (kube-proxy takes
// the host's connections there to a replica), once it answers.
func apiClient(t *testing.T, c *cluster.Cluster, key string) *client.Client {
	t.Helper()
	ip, err := c.Kubectl(t.Context(), "-n", "hutch", "get", "service", "hutch", "-o", "jsonpath={.spec.clusterIP}")
	if err != nil {
		t.Fatal(err)
	}
	api, err := client.New("http://"+string(ip)+":80", key, client.WithHTTPClient(&http.Client{Timeout: 2 * time.Minute}))
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		h, err := api.Health(ctx)
		cancel()
		if err == nil {
			t.Logf("the API answers through the Service at %s: version %s, default runtime %s", ip, h.Version, h.DefaultRuntime)
			for _, b := range h.Backends {
				t.Logf("  backend %+v", b)
			}
			return api
		}
		if time.Now().After(deadline) {
			t.Fatalf("the API Service did not answer in 60 s: %v", err)
		}
	}
}

// logPods shows the end of the log of each of Hutch's pods, and of the
// one before where a container restarted, for a failing test.
func logPods(t *testing.T, c *cluster.Cluster) {
	ctx := context.Background()
	out, err := c.Kubectl(ctx, "-n", "hutch", "get", "pods", "-o", "name")
	if err != nil {
		t.Log(err)
		return
	}
	for _, pod := range strings.Fields(string(out)) {
		for _, previous := range []bool{false, true} {
			logs, err := c.Kubectl(ctx, "-n", "hutch", "logs", pod, "--tail=60", fmt.Sprintf("--previous=%t", previous))
			switch {
			case err != nil && !previous:
				t.Logf("%s's log: %v", pod, err)
			case err == nil && len(logs) > 0:
				t.Logf("%s's log (previous: %t) ends:\n%s", pod, previous, logs)
			}
		}
	}
}
