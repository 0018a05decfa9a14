package agent

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Shim is the entry point of the hidden `hutch agent shim` command: the small
// supervisor the agent puts between itself and a command it starts when its
// direct slot is taken (see directSlot), so that the command can be killed
// together with everything it left behind, also processes that started a new
// session or double-forked. It returns the exit code of the shim process.
//
// The agent starts shims as root with no arguments (args must be empty) and
// keeps them ready: exec'ing a Go binary costs milliseconds, a request to a
// waiting shim a few microseconds. The shim's fds 0 and 1 are /dev/null, 2 is
// the agent's stderr, and fd 3 is a unix stream socket to the agent. The shim
// makes itself a child subreaper, then serves requests one at a time: it
// starts the requested command with the requested uid and gid (no
// supplementary groups), working directory, environment and stdio, in a
// process group of its own (a session of its own when its stdio is a
// terminal); reaps every process re-parented to it until none
// is left (the command and all it left behind); reports that it is idle and
// waits for the next request. EOF on fd 3 while idle makes it exit 0.
//
// Protocol on fd 3. Agent to shim, a request: a 4-byte big-endian length,
// then a JSON shimRequest of that length; the command's stdin, stdout and
// stderr ride on the first bytes as SCM_RIGHTS. The agent sends a request
// only to an idle shim. Shim to agent, newline-terminated text lines:
//
//	pid <n>        the command started with pid n
//	error <text>   it could not be started; the shim is idle again
//	exit <status>  it ended; status is its raw wait(2) status in decimal
//	idle           every process of the request is gone
//
// EOF from the agent while a command's processes run (the agent died) makes
// the shim SIGKILL all its descendants and exit. SIGTERM, SIGINT and SIGHUP
// sent to the shim are forwarded to the running command.
func Shim(args []string) int {
	if len(args) != 0 {
		fmt.Fprintln(os.Stderr, "hutch agent shim: takes no arguments; the agent starts it")
		return 2
	}
	// fd 3 may also be something the Go runtime opened: check for a socket.
	var st unix.Stat_t
	if err := unix.Fstat(3, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		fmt.Fprintln(os.Stderr, "hutch agent shim: fd 3 (control socket) is not open; the agent starts this command")
		return 2
	}
	ctl := os.NewFile(3, "control")
	syscall.CloseOnExec(3)
	report := func(format string, a ...any) {
		_, _ = fmt.Fprintf(ctl, format+"\n", a...)
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		report("error become child subreaper: %s", oneLine(err.Error()))
		return 1
	}
	// Handled signals are reset to their defaults in the command, unlike
	// ignored ones: the command starts with a clean signal disposition.
	var mainPid atomic.Int64
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() {
		for sig := range sigs {
			if s, ok := sig.(syscall.Signal); ok && mainPid.Load() > 0 {
				_ = syscall.Kill(int(mainPid.Load()), s)
			}
		}
	}()

	// One goroutine owns reading fd 3: requests go to the loop below; EOF
	// while processes run kills them.
	type incoming struct {
		req   shimRequest
		stdio []int
		err   error
	}
	requests := make(chan incoming)
	var busy atomic.Bool
	go func() {
		defer close(requests)
		for {
			req, stdio, err := readShimRequest(3)
			if err != nil {
				if errors.Is(err, io.EOF) && busy.Load() {
					// The agent is gone: nobody else can stop this tree.
					_ = killDescendants(os.Getpid(), time.Minute)
				}
				if !errors.Is(err, io.EOF) {
					requests <- incoming{err: err}
				}
				return
			}
			busy.Store(true)
			requests <- incoming{req: req, stdio: stdio}
		}
	}()

	for in := range requests {
		if in.err != nil {
			report("error %s", oneLine(in.err.Error()))
			return 1
		}
		pid, err := in.req.start(in.stdio, func(argv0 string, argv []string, attr *syscall.ProcAttr) (int, error) {
			return retryFork(func() (int, error) { return syscall.ForkExec(argv0, argv, attr) }, nil)
		})
		for _, fd := range in.stdio {
			_ = syscall.Close(fd)
		}
		if err != nil {
			busy.Store(false)
			report("error %s", oneLine(err.Error()))
			continue
		}
		mainPid.Store(int64(pid))
		report("pid %d", pid)
		reportedIdle := false
		for {
			var ws syscall.WaitStatus
			got, err := syscall.Wait4(-1, &ws, 0, nil)
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			if err != nil { // ECHILD: no child left, so no descendant either
				break
			}
			if got != pid {
				continue
			}
			mainPid.Store(0)
			// Usually nothing is left: then say so in the same write, so the
			// agent can reuse this shim before it ends the command's stream.
			if reapNoHang() {
				busy.Store(false)
				report("exit %d\nidle", uint32(ws))
				reportedIdle = true
				break
			}
			report("exit %d", uint32(ws))
		}
		if !reportedIdle {
			busy.Store(false)
			report("idle")
		}
	}
	return 0
}

// reapNoHang reaps children that have exited and reports whether none is
// left.
func reapNoHang() bool {
	for {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		switch {
		case errors.Is(err, syscall.EINTR):
		case err != nil: // ECHILD
			return true
		case got == 0: // children still run
			return false
		}
	}
}

// shimRequest is a command to start: sent to a shim, or started by the
// agent itself in its direct slot.
type shimRequest struct {
	UID  uint32   `json:"uid"`
	GID  uint32   `json:"gid"`
	Dir  string   `json:"dir"`
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
	// Path is the program to run when Argv[0] does not name it: a login
	// shell's Argv[0] is "-bash".
	Path string `json:"path,omitempty"`
	// TTY says the command's stdio is a terminal: it gets a session of
	// its own with that terminal as its controlling terminal, so that
	// job control, ^C and SIGWINCH reach it, rather than a process group
	// of its own. Either way its pid is its group's (a session leader
	// leads its group).
	TTY bool `json:"tty,omitempty"`
}

// maxShimRequest bounds a request (argv and environment).
const maxShimRequest = 16 << 20

// sendShimRequest writes req with stdio's fds attached to the agent's end of
// a shim's control socket. The caller closes stdio afterwards.
func sendShimRequest(ctl *os.File, req shimRequest, stdio [3]*os.File) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if len(body) > maxShimRequest {
		return fmt.Errorf("command too large for a shim: %d bytes", len(body))
	}
	// #nosec G115 -- bounded by maxShimRequest just above
	msg := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(body)), uint32(len(body)))
	msg = append(msg, body...)
	rc, err := ctl.SyscallConn()
	if err != nil {
		return err
	}
	fds := make([]int, 3)
	for i, f := range stdio {
		// Fd puts the file in blocking mode: the command's stdio must block.
		fds[i] = int(f.Fd())
	}
	var n int
	var serr error
	err = rc.Write(func(fd uintptr) bool {
		n, serr = unix.SendmsgN(int(fd), msg, unix.UnixRights(fds...), nil, 0)
		return !errors.Is(serr, syscall.EAGAIN)
	})
	if err == nil {
		err = serr
	}
	if err == nil && n < len(msg) {
		_, err = ctl.Write(msg[n:])
	}
	return err
}

// readShimRequest reads the request from fd, with the three stdio fds.
func readShimRequest(fd int) (req shimRequest, stdio []int, err error) {
	buf := make([]byte, 64<<10)
	oob := make([]byte, syscall.CmsgSpace(3*4))
	var got []byte
	for {
		n, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return req, stdio, fmt.Errorf("read request: %w", err)
		}
		if oobn > 0 {
			msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
			if err != nil {
				return req, stdio, fmt.Errorf("read request: %w", err)
			}
			for _, m := range msgs {
				fds, err := unix.ParseUnixRights(&m)
				if err == nil {
					stdio = append(stdio, fds...)
				}
			}
		}
		if n == 0 {
			if len(got) == 0 && len(stdio) == 0 {
				return req, stdio, io.EOF
			}
			return req, stdio, errors.New("read request: truncated")
		}
		got = append(got, buf[:n]...)
		if len(got) >= 4 {
			size := binary.BigEndian.Uint32(got)
			if size > maxShimRequest {
				return req, stdio, errors.New("read request: too large")
			}
			if len(got)-4 >= int(size) {
				if len(stdio) != 3 {
					return req, stdio, fmt.Errorf("read request: %d fds, want 3", len(stdio))
				}
				err := json.Unmarshal(got[4:4+size], &req)
				if err == nil && len(req.Argv) == 0 {
					err = errors.New("no command")
				}
				return req, stdio, err
			}
		}
	}
}

// start starts the command with stdio as fds 0, 1 and 2, through forkExec:
// the shim's syscall.ForkExec, or the agent's reaper for its direct slot, so
// that both start commands alike.
func (r shimRequest) start(stdio []int, forkExec func(string, []string, *syscall.ProcAttr) (int, error)) (int, error) {
	name := r.Argv[0]
	if r.Path != "" {
		name = r.Path
	}
	path, err := lookPath(name, r.Env)
	if err != nil {
		return 0, err
	}
	sys := &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: r.UID, Gid: r.GID, Groups: []uint32{}},
		Setpgid:    !r.TTY,
		// Ctty is a descriptor of the child's: its stdin, the terminal.
		Setsid: r.TTY, Setctty: r.TTY, Ctty: 0,
	}
	pid, err := forkExec(path, r.Argv, &syscall.ProcAttr{
		Dir:   r.Dir,
		Env:   r.Env,
		Files: []uintptr{uintptr(stdio[0]), uintptr(stdio[1]), uintptr(stdio[2])},
		Sys:   sys,
	})
	if err != nil {
		return 0, fmt.Errorf("start %s as uid %d in %s: %w", name, r.UID, r.Dir, err)
	}
	return pid, nil
}

// lookPath finds name in the PATH of env, as exec.LookPath does with the
// process's own environment. Relative PATH entries are skipped.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	pathEnv := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathEnv = v
		}
	}
	for _, dir := range filepath.SplitList(pathEnv) {
		if !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("exec: %q: executable file not found in $PATH", name)
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }
