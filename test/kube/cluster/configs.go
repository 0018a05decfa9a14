package cluster

import (
	"fmt"
	"os"
	"path/filepath"
)

// The components' configuration files. Each says why where it departs
// from the defaults; most departures are KUBE-TESTBED.md's facts about
// this machine kind (cgroup v1, no CAP_SYS_RESOURCE, no registry) or keep
// the cluster's files, ports and addresses to its own.

func (c *Cluster) writeConfigs() error {
	files := map[string]string{
		c.kubeconfig:                            c.pki.kubeconfig(fmt.Sprintf("https://%s:%d", NodeIP, apiserverPort)),
		c.path("kubelet.yaml"):                  c.kubeletConfig(),
		c.path("kube-proxy.yaml"):               c.proxyConfig(),
		c.path("containerd.toml"):               c.containerdConfig(),
		c.path("runsc.toml"):                    c.runscConfig(),
		c.path("cni", "10-hutch-kube.conflist"): cniConfig(c.path("cni", "ipam")),
	}
	for p, body := range files {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// kubeletConfig: cgroup v1 is refused unless failCgroupV1 is false; the
// kernel tunables it would insist on are set by it and put back by Up
// (protectKernelDefaults false); its pods' cgroups live under the
// cluster's own cgroup (cgroupRoot), which Down kills and removes whole.
// Eviction thresholds are low: a test machine's disk may be fuller than a
// node's, and an eviction would only make the test flaky.
func (c *Cluster) kubeletConfig() string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]s
port: %[2]d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %[3]d
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %[4]s}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
cgroupRoot: /%[5]s
cgroupsPerQOS: true
failCgroupV1: false
failSwapOn: false
protectKernelDefaults: false
containerRuntimeEndpoint: unix://%[6]s
podLogsDir: %[7]s
maxPods: 30
serializeImagePulls: false
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%%
  nodefs.inodesFree: 1%%
  imagefs.available: 1%%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
`, NodeIP, kubeletPort, kubeletHealthzPort, c.pki.caCert, CgroupName, c.containerdSocket, c.path("pod-logs"))
}

// proxyConfig: nftables mode (the machine has no iptables), node ports
// only on the node's address, and conntrack left as it is (zeros).
func (c *Cluster) proxyConfig() string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
clientConnection: {kubeconfig: %[1]s}
hostnameOverride: %[2]s
clusterCIDR: %[3]s
metricsBindAddress: 127.0.0.1:%[4]d
healthzBindAddress: 127.0.0.1:%[5]d
nodePortAddresses: ["%[6]s/32"]
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, c.kubeconfig, NodeName, PodCIDR, proxyMetricsPort, proxyHealthzPort, NodeIP)
}

// containerdConfig: every directory and socket in the cluster's own; a
// negative OOM score is refused to root here (restrict_oom_score_adj);
// no registry, so the pause image is one imported and pinned; NRI off (it
// would make a socket under /var/run); runsc for RuntimeClass gvisor.
func (c *Cluster) containerdConfig() string {
	return fmt.Sprintf(`version = 3
root = %[1]q
state = %[2]q

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q

[plugins."io.containerd.nri.v1.nri"]
  disable = true

[plugins."io.containerd.cri.v1.images"]
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = %[6]q

[plugins."io.containerd.cri.v1.runtime"]
  enable_selinux = false
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = %[7]q
        Root = %[8]q
        SystemdCgroup = false
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runsc]
      runtime_type = "io.containerd.runsc.v1"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runsc.options]
        TypeUrl = "io.containerd.runsc.v1.options"
        ConfigPath = %[9]q
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = [%[10]q]
    conf_dir = %[11]q

[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
`, c.path("containerd", "root"), c.path("containerd", "state"), c.containerdSocket, c.containerdSocket+".ttrpc",
		c.path("containerd", "opt"), PauseImage, c.cfg.Runc, c.path("containerd", "runc"),
		c.path("runsc.toml"), filepath.Join(c.cfg.Bin, "cni"), c.path("cni"))
}

// runscConfig is gVisor's shim's: systrap, the platform these machines
// have (no KVM worth the name).
func (c *Cluster) runscConfig() string {
	return fmt.Sprintf(`binary_name = %q
root = %q
log_level = "info"

[runsc_config]
  platform = "systrap"
`, c.cfg.Runsc, c.path("runsc-root"))
}

// cniConfig is one bridge network on the bridge Up made, which already
// has the gateway's address: the plugin is not the gateway, so it leaves
// the host's forwarding alone. Pods get a route to the node and the
// services only, and none out: nothing of the cluster leaves the machine.
func cniConfig(ipamDir string) string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "hutch-kube",
  "plugins": [{
    "type": "bridge",
    "bridge": %q,
    "isGateway": false,
    "ipMasq": false,
    "hairpinMode": true,
    "ipam": {
      "type": "host-local",
      "dataDir": %q,
      "ranges": [[{"subnet": %q, "rangeStart": %q, "gateway": %q}]],
      "routes": [{"dst": %q, "gw": %q}]
    }
  }]
}
`, Bridge, ipamDir, PodCIDR, podRangeStart, NodeIP, reachable, NodeIP)
}
