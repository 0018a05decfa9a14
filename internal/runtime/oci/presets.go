package oci

// The two runtimes Hutch drives, as the daemon (and the conformance tests)
// configure them. The caller adds where state and sandboxes go, the disk
// pool, the agent's executable and the logger.

// RuncConfig configures runc at binary.
func RuncConfig(binary string) Config {
	return Config{Name: "runc", Binary: binary, Install: "install it: apt-get install runc", UserNamespace: true, LiveMounts: true, DeletesByState: true, SealedCopy: true, CgroupBinds: true, StartNamespace: true}
}

// GvisorConfig configures gVisor's runsc at binary.
func GvisorConfig(binary string) Config {
	return Config{
		Name:    "gvisor",
		Binary:  binary,
		Install: "build it: make runsc (./setup does)",
		// systrap: the KVM platform needs hardware virtualisation. The
		// agent creates its socket on the host through the gofer
		// (host-uds=create); the network is a namespace the daemon
		// makes (see network.go; loopback only without); the bundle's
		// seccomp profile applies inside gVisor too (oci-seccomp).
		// overlay2=none: the root's writes go to the sandbox's disk like
		// runc's, within its limit, not to gVisor's own overlay in a file
		// that gVisor does not survive filling the disk.
		Flags:                 []string{"--platform=systrap", "--host-uds=create", "--oci-seccomp", "--overlay2=none"},
		AgentListens:          true,
		Checkpoints:           true,
		MountsTmpfsAtTmp:      true,
		KernelCountsProcesses: true,
		StubsTakeOOMKills:     true,
		OwnNetwork:            true,
		CopiesNetns:           true,
		SeccompErrnoIsEPERM:   true,
		DefaultTimerSlack:     true,
	}
}
