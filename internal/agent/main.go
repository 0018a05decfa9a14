package agent

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// Main is the agent's command line, given the arguments after "agent": the
// runtime starts it as PID 1 of every sandbox, and the agent starts its
// shims with it. It returns the process's exit code.
//
//	agent --listen-fd N   serve on the listening unix socket N
//	agent --socket PATH   listen on PATH and serve there
//	agent shim …          see Shim
//
// The agent is its own small binary, cmd/hutch-agent, which make build
// embeds in hutch (see package agentexe): it imports only what runs in a
// sandbox, and starts in ~1.5 ms of Go initialisation where the whole hutch
// binary took ~6 ms (313 package inits). hutch agent runs the same Main,
// for a hutch built without it.
//
// Both run Go on one processor (GOMAXPROCS 1). They wait on sockets,
// pipes and children, and the CPU they use is the sandbox's: more
// processors bought idle threads spinning and waking each other, each
// wake a syscall, which under gVisor costs ~10 µs here. With one, a
// create → exec → delete took 97 ms of host CPU instead of 107, 20
// clients ran 18.0 lifecycles a second instead of 16.4, and a call into
// a gVisor sandbox's agent took ~0.3 ms less. The runtimes give it at exec
// (GOMAXPROCS=1, see agentv1.OneProcessor), which spares the Go runtime
// starting on every CPU first; the call below covers every other start.
func Main(ctx context.Context, args []string, stderr io.Writer) int {
	const exitError, exitUsage = 1, 2
	runtime.GOMAXPROCS(1)
	if len(args) > 0 && args[0] == "shim" {
		return Shim(args[1:])
	}
	flags := flag.NewFlagSet("hutch agent", flag.ContinueOnError)
	flags.SetOutput(stderr)
	socket := flags.String("socket", "", "unix socket to listen on")
	fd := flags.Int("listen-fd", -1, "listening unix socket to serve on, as a file descriptor (3 or more)")
	nprocExempt := flags.Bool("nproc-exempt", false, "the process limit is RLIMIT_NPROC and the agent holds CAP_SYS_RESOURCE: make no threads ahead")
	tasksFD := flags.Int("tasks-fd", -1, "the tasks file of the cgroup v1 to fork the sandbox's processes in, as a file descriptor")
	if err := flags.Parse(args); err != nil {
		return exitUsage
	}
	if flags.NArg() > 0 || (*socket == "") == (*fd < 0) || (*fd >= 0 && *fd < 3) {
		_, _ = fmt.Fprintln(stderr, "hutch agent: give either --socket PATH or --listen-fd N (N ≥ 3), and no arguments")
		return exitUsage
	}

	cfg := Config{Socket: *socket, NprocExempt: *nprocExempt, Logger: slog.New(slog.NewTextHandler(stderr, nil))}
	if *tasksFD >= 3 && *tasksFD != *fd {
		// Taken only if it is a cgroup's file: without one given, the
		// descriptor is not the agent's to close.
		var fs unix.Statfs_t
		if err := unix.Fstatfs(*tasksFD, &fs); err == nil && fs.Type == unix.CGROUP_SUPER_MAGIC {
			syscall.CloseOnExec(*tasksFD) // no child may get it
			cfg.TenantTasks = os.NewFile(uintptr(*tasksFD), "tasks")
		} else {
			_, _ = fmt.Fprintf(stderr, "hutch agent: descriptor %d is no cgroup's tasks file (%v); making threads ahead\n", *tasksFD, err)
		}
	}
	if *fd >= 0 {
		f := os.NewFile(uintptr(*fd), "listener")
		ln, err := net.FileListener(f) // a copy of f's descriptor
		_ = f.Close()
		if err != nil {
			_, _ = fmt.Fprintf(stderr, "hutch agent: descriptor %d is not a listening socket: %v\n", *fd, err)
			return exitError
		}
		cfg.Listener = ln
	}
	if err := Run(ctx, cfg); err != nil {
		_, _ = fmt.Fprintf(stderr, "hutch agent: %v\n", err)
		return exitError
	}
	return 0
}
