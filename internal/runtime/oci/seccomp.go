package oci

import (
	"runtime"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// deniedSyscalls fail with EPERM in every sandbox, whoever calls them. They
// are kernel interfaces that code in a sandbox has no business with and
// that have been the way out of containers, in the spirit of Docker's
// default profile. The profile allows what it does not name, so a program
// that works on the host works here; what it names is closed even to root
// in the sandbox, whose capabilities would not stop every one of them.
var deniedSyscalls = []string{
	// Mounting, old API and new (capabilities stop most; this stops all).
	"mount", "umount", "umount2", "pivot_root", "mount_setattr",
	"fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree",
	// Joining other namespaces.
	"setns",
	// Kernel programs, tracing and keys: large, often-exploited surfaces.
	"bpf", "perf_event_open", "keyctl", "add_key", "request_key",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	"userfaultfd",
	// The machine itself: modules, kexec, reboot, swap, clocks, accounting.
	"init_module", "finit_module", "delete_module", "create_module",
	"kexec_load", "kexec_file_load", "reboot", "swapon", "swapoff",
	"settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "stime",
	"acct", "quotactl", "quotactl_fd", "syslog", "lookup_dcookie", "nfsservctl",
	"iopl", "ioperm", "vm86", "vm86old", "uselib", "sysfs", "ustat",
	// File handles bypass path checks (the "shocker" escape).
	"open_by_handle_at", "name_to_handle_at",
}

// seccompProfile is the sandbox's seccomp filter: deniedSyscalls, plus no
// new user namespace. A user namespace would make the sandbox's user root
// of a namespace of its own and open kernel code that assumes root to it,
// so unshare and clone with CLONE_NEWUSER fail with EPERM. clone3 passes
// its flags in memory a filter cannot read, so it fails with ENOSYS, and the
// C library falls back to clone, whose flags are checked (as Docker does).
//
// Unless the runtime turns every errno of the profile into EPERM (runsc
// does): the C library then does not fall back, and no thread could be
// made. There clone3 stays open, and a user namespace made with it is one
// of gVisor's kernel, not the host's.
func seccompProfile(errnoIsEPERM bool) *specs.LinuxSeccomp {
	eperm, enosys := uint(unix.EPERM), uint(unix.ENOSYS)
	newUser := specs.LinuxSeccompArg{Index: 0, Value: unix.CLONE_NEWUSER, ValueTwo: unix.CLONE_NEWUSER, Op: specs.OpMaskedEqual}
	p := &specs.LinuxSeccomp{
		DefaultAction: specs.ActAllow,
		Architectures: seccompArchitectures(),
		Syscalls: []specs.LinuxSyscall{
			{Names: deniedSyscalls, Action: specs.ActErrno, ErrnoRet: &eperm},
			{Names: []string{"unshare", "clone"}, Action: specs.ActErrno, ErrnoRet: &eperm, Args: []specs.LinuxSeccompArg{newUser}},
		},
	}
	if !errnoIsEPERM {
		p.Syscalls = append(p.Syscalls, specs.LinuxSyscall{Names: []string{"clone3"}, Action: specs.ActErrno, ErrnoRet: &enosys})
	}
	return p
}

// seccompArchitectures are the system call ABIs a process on this host can
// use: the native one and its compatibility ones, so that a 32-bit program
// meets the same filter.
func seccompArchitectures() []specs.Arch {
	switch runtime.GOARCH {
	case "amd64":
		return []specs.Arch{specs.ArchX86_64, specs.ArchX86, specs.ArchX32}
	case "arm64":
		return []specs.Arch{specs.ArchAARCH64, specs.ArchARM}
	default:
		return nil // the native ABI only
	}
}
