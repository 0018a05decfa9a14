package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process is one component the cluster started, its output in a log file
// of its own.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// start starts argv as component name, in the mount namespace of the
// holder when inNS, with env added to this process's environment. It is
// killed if this process dies first (the next run cleans what is left).
func (c *Cluster) start(name string, inNS bool, env []string, argv ...string) (*process, error) {
	if inNS {
		argv = append([]string{"nsenter", "--mount=/proc/" + strconv.Itoa(c.holder.cmd.Process.Pid) + "/ns/mnt", "--"}, argv...)
	}
	if err := os.MkdirAll(c.path("logs"), 0o700); err != nil {
		return nil, err
	}
	p := &process{name: name, log: c.path("logs", name+".log"), done: make(chan struct{})}
	f, err := os.Create(p.log)
	if err != nil {
		return nil, err
	}
	defer f.Close()                            // the child has its own descriptor
	p.cmd = exec.Command(argv[0], argv[1:]...) // #nosec G204 -- the cluster's own binaries
	p.cmd.Stdout, p.cmd.Stderr = f, f
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	c.procs = append(c.procs, p)
	c.logf("started %s (pid %d), log %s", name, p.cmd.Process.Pid, p.log)
	return p, nil
}

// stop ends p: SIGTERM, then SIGKILL after grace.
func (p *process) stop(grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// logTail is the end of a component's log, for an error.
func (c *Cluster) logTail(name string) string {
	b, err := os.ReadFile(c.path("logs", name+".log"))
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return name + "'s log ends:\n" + strings.Join(lines, "\n")
}

// LogTail is the end of a component's log (etcd, kube-apiserver, …,
// containerd, kubelet), for a failing test to show.
func (c *Cluster) LogTail(name string) string { return c.logTail(name) }

// httpsClient trusts the cluster's CA and presents the admin certificate.
func httpsClient(p *pki) (*http.Client, error) {
	ca, err := os.ReadFile(p.caCert)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	cert, err := tls.LoadX509KeyPair(p.adminCert, p.adminKey)
	if err != nil {
		return nil, err
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
	}}, nil
}
