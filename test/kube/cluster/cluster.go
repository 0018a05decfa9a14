// Package cluster runs a real single-node Kubernetes on this machine for
// Hutch's Kubernetes test, from binaries built beforehand
// (test/kube/build-cluster.sh): etcd, the control plane, containerd with
// runc and gVisor's shim, the bridge CNI plugin, kube-proxy (nftables)
// and the kubelet. It follows /work/shared/KUBE-TESTBED.md's facts.
//
// Everything it writes is in its own directory; what the kubelet and
// containerd change on the host regardless (sysctls, directories, cgroups,
// a bridge, nftables tables) is recorded first and put back by Down.
// containerd and the kubelet run in a mount namespace of their own, held
// by an unshare process, whose mounts are shared among themselves (pods
// may ask for Bidirectional propagation) and never reach the host's
// mount table: they die with that namespace.
//
// Its addresses are on a bridge it makes: the node is NodeIP, pods get
// PodCIDR and a route to the node and the services only, services
// ServiceCIDR. Its ports are fixed, on NodeIP or the loopback, none of a
// Hutch daemon's.
package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The cluster's network.
const (
	Bridge        = "hutchkube0"
	NodeIP        = "10.213.1.1"
	PodCIDR       = "10.213.1.0/24"
	podRangeStart = "10.213.1.10"
	ServiceCIDR   = "10.213.2.0/24"
	// reachable is what pods have a route to: the node and the services.
	reachable = "10.213.0.0/16"
	NodeName  = "hutch-kube"
)

// The cluster's ports: on NodeIP for what pods or the API server reach,
// else on the loopback.
const (
	etcdPort           = 22379
	etcdPeerPort       = 22380
	apiserverPort      = 26443
	controllerPort     = 20257
	schedulerPort      = 20259
	kubeletPort        = 20250
	kubeletHealthzPort = 20248
	proxyMetricsPort   = 20249
	proxyHealthzPort   = 20256
)

// PauseImage is the pods' sandbox image: Config.Images must hold it.
const PauseImage = "hutch-kube.local/pause:1"

// Config is what a cluster is made of.
type Config struct {
	// Bin holds the built binaries: kube-apiserver, …, kubelet, kubectl,
	// etcd, containerd, containerd-shim-runc-v2,
	// containerd-shim-runsc-v1, ctr, and cni/.
	Bin string
	// Dir is the cluster's own directory, made by the caller, short (unix
	// socket paths live in it).
	Dir string
	// Runc and Runsc are the runtimes' binaries, for runc and gvisor pods.
	Runc, Runsc string
	// Images are docker-archive tarballs imported before the kubelet
	// starts; one holds PauseImage.
	Images []string
	// Logf reports progress; nil: nothing.
	Logf func(format string, args ...any)
}

// Cluster is a running cluster.
type Cluster struct {
	cfg              Config
	pki              *pki
	kubeconfig       string
	containerdSocket string
	state            hostState
	stateSaved       bool
	lock             *os.File
	holder           *process // the mount namespace's holder
	procs            []*process
	// Timings of Up's parts, for the caller to print.
	Timings []Timing
}

// Timing is how long one part took.
type Timing struct {
	Part string
	Took time.Duration
}

func (c *Cluster) path(parts ...string) string {
	return filepath.Join(append([]string{c.cfg.Dir}, parts...)...)
}

func (c *Cluster) logf(format string, args ...any) {
	if c.cfg.Logf != nil {
		c.cfg.Logf(format, args...)
	}
}

// Up starts a cluster and waits until its node is Ready and pods may be
// made. On an error it has already put the host back (Down).
func Up(ctx context.Context, cfg Config) (_ *Cluster, err error) {
	c := &Cluster{cfg: cfg}
	c.kubeconfig = c.path("admin.kubeconfig")
	c.containerdSocket = c.path("containerd", "containerd.sock")
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Down())
		}
	}()
	if err := c.claimHost(); err != nil {
		return nil, err
	}
	for _, step := range []struct {
		name string
		fn   func(context.Context) error
	}{
		{"network and certificates", c.setUp},
		{"etcd and control plane", c.startControlPlane},
		{"containerd and images", c.startContainerd},
		{"kubelet and kube-proxy", c.startNode},
	} {
		began := time.Now()
		if err := step.fn(ctx); err != nil {
			return nil, fmt.Errorf("%s: %w", step.name, err)
		}
		c.Timings = append(c.Timings, Timing{step.name, time.Since(began)})
	}
	return c, nil
}

// claimHost takes the host for the cluster: one at a time, after cleaning
// what a run that died left, with what may change recorded first.
func (c *Cluster) claimHost() error {
	if os.Geteuid() != 0 {
		return errors.New("needs root")
	}
	lock, err := os.OpenFile(lockFile, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return fmt.Errorf("another test cluster runs on this machine (%s)", lockFile)
	}
	c.lock = lock
	if old, err := loadState(); err == nil {
		c.logf("cleaning what an earlier run left (%s)", stateFile)
		if err := cleanHost(old, c.logf); err != nil {
			return fmt.Errorf("clean an earlier run's leftovers: %w", err)
		}
	}
	if err := c.checkFree(); err != nil {
		return err
	}
	c.state = hostState{Dir: c.cfg.Dir, Sysctls: readSysctls()}
	for _, p := range hostPaths {
		if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
			c.state.NewPaths = append(c.state.NewPaths, p)
		}
	}
	hs, err := hierarchies()
	if err != nil {
		return err
	}
	track := trackingHierarchy(hs)
	if c.state.Cgroup, err = ownCgroup(track); err != nil {
		return err
	}
	if err := c.state.save(); err != nil {
		return err
	}
	c.stateSaved = true
	// The cluster's cgroup in every hierarchy (the kubelet's cgroupRoot
	// must be in each), and this process in it, so that whatever it
	// starts is found again by Down.
	for _, h := range hs {
		if err := os.Mkdir(filepath.Join(h, CgroupName), 0o700); err != nil {
			return fmt.Errorf("make the cluster's cgroup: %w", err)
		}
	}
	return os.WriteFile(filepath.Join(track, CgroupName, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0o600)
}

// checkFree refuses a host where the cluster's names or ports are taken.
func (c *Cluster) checkFree() error {
	var errs []error
	if linkExists(Bridge) {
		errs = append(errs, fmt.Errorf("interface %s exists", Bridge))
	}
	hs, err := hierarchies()
	if err != nil {
		return err
	}
	for _, h := range hs {
		if _, err := os.Stat(filepath.Join(h, CgroupName)); err == nil {
			errs = append(errs, fmt.Errorf("cgroup %s exists", filepath.Join(h, CgroupName)))
		}
	}
	errs = append(errs, PortsFree("127.0.0.1", etcdPort, etcdPeerPort, controllerPort, schedulerPort, kubeletHealthzPort, proxyMetricsPort, proxyHealthzPort))
	// The node's address is not there yet: a listener on every address
	// would take its ports.
	errs = append(errs, PortsFree("0.0.0.0", apiserverPort, kubeletPort))
	return errors.Join(errs...)
}

// PortsFree reports the ports of ports that cannot be listened on at
// host.
func PortsFree(host string, ports ...int) error {
	var errs []error
	for _, port := range ports {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			errs = append(errs, fmt.Errorf("port %d on %s is taken", port, host))
			continue
		}
		ln.Close()
	}
	return errors.Join(errs...)
}

// setUp makes the network (the bridge, with the node's address and a
// route for the service range, so that a service address that kube-proxy
// does not translate stays on it), the certificates and the configs.
func (c *Cluster) setUp(ctx context.Context) error {
	for _, argv := range [][]string{
		{"ip", "link", "add", Bridge, "type", "bridge"},
		{"ip", "addr", "add", NodeIP + "/24", "dev", Bridge},
		{"ip", "link", "set", Bridge, "up"},
		{"ip", "route", "add", ServiceCIDR, "dev", Bridge},
	} {
		if err := run(argv...); err != nil {
			return err
		}
	}
	var err error
	serviceIP := strings.TrimSuffix(ServiceCIDR, "0/24") + "1" // the kubernetes Service's
	if c.pki, err = makePKI(c.path("pki"), []net.IP{net.ParseIP(NodeIP), net.ParseIP(serviceIP), net.ParseIP("127.0.0.1")}); err != nil {
		return err
	}
	return c.writeConfigs()
}

func (c *Cluster) bin(name string) string { return filepath.Join(c.cfg.Bin, name) }

func (c *Cluster) startControlPlane(ctx context.Context) error {
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPeerPort)
	if _, err := c.start("etcd", false, nil, c.bin("etcd"), "--name=default", "--data-dir="+c.path("etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=default="+peerURL, "--unsafe-no-fsync", "--log-level=warn"); err != nil {
		return err
	}
	if err := waitHTTP(ctx, "etcd", etcdURL+"/health", nil, 30*time.Second); err != nil {
		return err
	}
	p := c.pki
	if _, err := c.start("kube-apiserver", false, nil, c.bin("kube-apiserver"),
		"--etcd-servers="+etcdURL,
		"--bind-address="+NodeIP, "--advertise-address="+NodeIP, fmt.Sprintf("--secure-port=%d", apiserverPort),
		"--tls-cert-file="+p.serverCert, "--tls-private-key-file="+p.serverKey, "--client-ca-file="+p.caCert,
		"--service-cluster-ip-range="+ServiceCIDR,
		"--service-account-issuer=https://kubernetes.default.svc", "--service-account-key-file="+p.saPub,
		"--service-account-signing-key-file="+p.saKey,
		"--authorization-mode=RBAC", "--allow-privileged=true",
		"--kubelet-client-certificate="+p.adminCert, "--kubelet-client-key="+p.adminKey,
		// The node's address, not its name: nothing to resolve.
		"--kubelet-preferred-address-types=InternalIP",
		"--cert-dir="+c.path("apiserver"), "--profiling=false", "--enable-priority-and-fairness=false"); err != nil {
		return err
	}
	client, err := c.httpClient()
	if err != nil {
		return err
	}
	if err := waitHTTP(ctx, "kube-apiserver", fmt.Sprintf("https://%s:%d/readyz", NodeIP, apiserverPort), client, 60*time.Second); err != nil {
		return err
	}
	// Both serve their health on the loopback only, and ask the API
	// server who may read it.
	common := []string{"--kubeconfig=" + c.kubeconfig, "--authentication-kubeconfig=" + c.kubeconfig,
		"--authorization-kubeconfig=" + c.kubeconfig, "--leader-elect=false", "--bind-address=127.0.0.1", "--profiling=false"}
	controller := append([]string{c.bin("kube-controller-manager"),
		fmt.Sprintf("--secure-port=%d", controllerPort), "--cert-dir=" + c.path("controller-manager"),
		"--service-account-private-key-file=" + p.saKey, "--root-ca-file=" + p.caCert,
		"--use-service-account-credentials=false"}, common...)
	if _, err := c.start("kube-controller-manager", false, nil, controller...); err != nil {
		return err
	}
	scheduler := append([]string{c.bin("kube-scheduler"),
		fmt.Sprintf("--secure-port=%d", schedulerPort), "--cert-dir=" + c.path("scheduler")}, common...)
	_, err = c.start("kube-scheduler", false, nil, scheduler...)
	return err
}

// startContainerd starts the mount namespace's holder, containerd in it,
// and imports the images.
func (c *Cluster) startContainerd(ctx context.Context) error {
	holder, err := c.start("mount-namespace", false, nil, "unshare", "--mount", "--propagation", "shared", "--", "sleep", "infinity")
	if err != nil {
		return err
	}
	c.holder = holder
	// Until unshare has made the namespace, entering its pid enters the
	// host's: wait until it differs.
	host, _ := os.Readlink("/proc/self/ns/mnt")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", holder.cmd.Process.Pid)); err == nil && ns != host {
			break
		}
		if time.Now().After(deadline) {
			return errors.New("unshare made no mount namespace in 10 s")
		}
	}
	env := []string{"PATH=" + c.cfg.Bin + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	if _, err := c.start("containerd", true, env, c.bin("containerd"), "--config="+c.path("containerd.toml")); err != nil {
		return err
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		// #nosec G204 -- the cluster's own binary
		if err := exec.CommandContext(ctx, c.bin("ctr"), "--address", c.containerdSocket, "version").Run(); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("containerd did not answer in 30 s: %s", c.logTail("containerd"))
		}
	}
	for _, img := range c.cfg.Images {
		if err := c.Import(ctx, img); err != nil {
			return err
		}
	}
	return nil
}

// Import loads a docker-archive tarball into the node's images.
func (c *Cluster) Import(ctx context.Context, tarball string) error {
	out, err := exec.CommandContext(ctx, c.bin("ctr"), "--address", c.containerdSocket, "--namespace", "k8s.io",
		"images", "import", tarball).CombinedOutput() // #nosec G204 -- the cluster's own binary
	if err != nil {
		return fmt.Errorf("import %s: %w: %s", tarball, err, out)
	}
	return nil
}

// startNode starts kube-proxy and the kubelet, waits for the node to be
// Ready and for the default ServiceAccount (pods are refused before it),
// puts back the kernel settings the kubelet changed, and adds the gvisor
// RuntimeClass.
func (c *Cluster) startNode(ctx context.Context) error {
	if _, err := c.start("kube-proxy", false, nil, c.bin("kube-proxy"), "--config="+c.path("kube-proxy.yaml")); err != nil {
		return err
	}
	if _, err := c.start("kubelet", true, nil, c.bin("kubelet"), "--config="+c.path("kubelet.yaml"),
		"--kubeconfig="+c.kubeconfig, "--root-dir="+c.path("kubelet"), "--cert-dir="+c.path("kubelet-pki"),
		"--hostname-override="+NodeName, "--node-ip="+NodeIP); err != nil {
		return err
	}
	if _, err := c.Kubectl(ctx, "wait", "--for=condition=Ready", "node/"+NodeName, "--timeout=90s"); err != nil {
		// wait fails at once while the node is not registered yet.
		for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(500 * time.Millisecond) {
			if _, err = c.Kubectl(ctx, "wait", "--for=condition=Ready", "node/"+NodeName, "--timeout=60s"); err == nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("node not Ready: %w: %s", err, c.logTail("kubelet"))
			}
		}
	}
	if err := restoreSysctls(c.state.Sysctls, c.logf); err != nil {
		return err
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if _, err := c.Kubectl(ctx, "get", "serviceaccount", "default"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return errors.New("no default ServiceAccount after 30 s")
		}
	}
	_, err := c.KubectlIn(ctx, "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata: {name: gvisor}\nhandler: runsc\n", "apply", "-f", "-")
	return err
}

// Kubectl runs kubectl on the cluster and returns its standard output.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) ([]byte, error) {
	return c.KubectlIn(ctx, "", args...)
}

// KubectlIn runs kubectl with stdin on its standard input.
func (c *Cluster) KubectlIn(ctx context.Context, stdin string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, c.bin("kubectl"), append([]string{"--kubeconfig", c.kubeconfig}, args...)...) // #nosec G204 -- the cluster's own kubectl
	cmd.Stdin = strings.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

func (c *Cluster) httpClient() (*http.Client, error) {
	return httpsClient(c.pki)
}

// waitHTTP waits until url answers 200.
func waitHTTP(ctx context.Context, what, url string, client *http.Client, within time.Duration) error {
	if client == nil {
		client = http.DefaultClient
	}
	deadline := time.Now().Add(within)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("%s", resp.Status)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %v: %w", what, within, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
