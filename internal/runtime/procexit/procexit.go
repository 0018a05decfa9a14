// Package procexit tells when a host process that is not the daemon's child
// ends, and how: a sandbox's container ends without the daemon's doing
// (killed from outside, by the host's OOM killer, a runtime crash) and the
// daemon must notice at once and say what it saw.
//
// The end is seen through a pidfd (Linux 5.3+), which becomes readable when
// its process ends, whoever its parent is; the daemon's network poller
// waits on it, so watching costs no thread. How it ended (its wait status:
// the exit code, or the signal that killed it) is known only to its
// parent, which is the host's init, not the daemon, for a detached
// container. The kernel's proc connector (NETLINK_CONNECTOR, CN_IDX_PROC)
// tells every listener that status as each process exits; the Watcher
// listens, keeping the status of the processes it watches. The connector
// needs root in the host's namespaces; without it, and for an exit whose
// message was lost (the socket overran), an end is still seen, not why.
package procexit

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sync"
	"time"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Exit is how a process ended.
type Exit struct {
	// Known says whether the status below was heard; when not, only the
	// end was seen.
	Known bool
	// Signal is the signal that killed it (0: it exited), Code its exit
	// code.
	Signal unix.Signal
	Code   int
}

// String says how the process ended, as in "was killed by signal 9
// (SIGKILL)" or "exited with code 1".
func (e Exit) String() string {
	switch {
	case !e.Known:
		return "ended (how is not known)"
	case e.Signal != 0:
		return fmt.Sprintf("was killed by signal %d (%s)", int(e.Signal), unix.SignalName(e.Signal))
	default:
		return fmt.Sprintf("exited with code %d", e.Code)
	}
}

// statusWait bounds how long Wait waits for the connector's message after
// the pidfd said the process ended: the kernel sends the message first,
// but the listener may not have read it yet.
const statusWait = 200 * time.Millisecond

// Watcher waits for processes to end. Use one per daemon; it is safe for
// concurrent use.
type Watcher struct {
	log *slog.Logger

	mu       sync.Mutex
	listened bool               // the connector works
	watched  map[int]*statusBox // pids being waited for
}

// statusBox receives one process's exit status from the listener.
type statusBox struct {
	once sync.Once
	ch   chan Exit
}

func (b *statusBox) put(e Exit) { b.once.Do(func() { b.ch <- e }) }

// New returns a Watcher and starts listening to the proc connector until
// ctx ends. When the connector cannot be used, it says why in the log and
// watches without it.
func New(ctx context.Context, log *slog.Logger) *Watcher {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &Watcher{log: log, watched: map[int]*statusBox{}}
	fd, err := listen()
	if err != nil {
		log.Warn("process exits are seen, not how they ended: the proc connector is not usable", "error", err)
		return w
	}
	w.listened = true
	go w.read(ctx, fd)
	return w
}

// Wait waits until process pid ends or ctx ends, and says how it ended.
// alive, checked once the process is being watched, confirms that pid is
// still the process meant (a pid is reused once its process is gone); if
// it says no, Wait returns at once, how the process ended unknown.
func (w *Watcher) Wait(ctx context.Context, pid int, alive func() bool) (Exit, error) {
	box := &statusBox{ch: make(chan Exit, 1)}
	w.mu.Lock()
	w.watched[pid] = box
	listened := w.listened
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		if w.watched[pid] == box {
			delete(w.watched, pid)
		}
		w.mu.Unlock()
	}()
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if errors.Is(err, unix.ESRCH) {
		return Exit{}, nil // gone already
	}
	if err != nil {
		return Exit{}, fmt.Errorf("watch process %d: %w", pid, err)
	}
	pidfd := os.NewFile(uintptr(fd), "pidfd")
	defer pidfd.Close()
	if !alive() {
		return Exit{}, nil
	}
	if err := waitReadable(ctx, pidfd); err != nil {
		return Exit{}, err
	}
	if !listened {
		return Exit{}, nil
	}
	select {
	case e := <-box.ch:
		return e, nil
	case <-time.After(statusWait):
		return Exit{}, nil
	}
}

// waitReadable waits in the network poller until f (a pidfd) is readable,
// that is its process has ended, or ctx ends.
func waitReadable(ctx context.Context, f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { _ = f.SetReadDeadline(time.Now()) })
	defer stop()
	err = rc.Read(func(fd uintptr) bool {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}} // #nosec G115 -- an fd
		n, _ := unix.Poll(pfd, 0)
		return n > 0
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// Sizes of the connector's messages (linux/netlink.h, connector.h,
// cn_proc.h).
const (
	nlmsgHdrLen   = 16
	cnMsgLen      = 20 // idx, val, seq, ack, len, flags
	cnIdxProc     = 1
	cnValProc     = 1
	mcastListen   = 1          // PROC_CN_MCAST_LISTEN
	procEventExit = 0x80000000 // PROC_EVENT_EXIT
)

// listen subscribes a netlink socket to the proc connector.
func listen() (int, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_CONNECTOR)
	if err != nil {
		return -1, fmt.Errorf("open netlink connector socket: %w", err)
	}
	// A busy host ends many processes: room for bursts (the kernel caps
	// it at rmem_max; SO_RCVBUFFORCE passes that as root).
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 4<<20)
	if err := filterExits(fd); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: cnIdxProc}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("bind netlink connector socket: %w", err)
	}
	msg := make([]byte, nlmsgHdrLen+cnMsgLen+4)
	binary.NativeEndian.PutUint32(msg[0:], uint32(len(msg))) // #nosec G115 -- 40
	binary.NativeEndian.PutUint16(msg[4:], unix.NLMSG_DONE)
	binary.NativeEndian.PutUint32(msg[nlmsgHdrLen:], cnIdxProc)
	binary.NativeEndian.PutUint32(msg[nlmsgHdrLen+4:], cnValProc)
	binary.NativeEndian.PutUint16(msg[nlmsgHdrLen+16:], 4)
	binary.NativeEndian.PutUint32(msg[nlmsgHdrLen+cnMsgLen:], mcastListen)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("subscribe to process events: %w", err)
	}
	return fd, nil
}

// exitFilter is the program the kernel runs on each connector message
// before the socket gets it: it keeps a process's exit (PROC_EVENT_EXIT of
// a thread-group leader, the only message deliver uses) and drops the
// rest, the fork, exec, rename and thread exit of everything on the host
// (~60 for each sandbox's create, exec and delete), so the listener wakes
// for the exits alone. Messages come one per datagram, the netlink header
// first, then the connector's, then the proc_event (what, cpu, timestamp,
// then pid and tgid). Classic BPF loads a word big-endian; the fields are
// in the host's order, so the constant is compared in its loaded form (pid
// and tgid, loaded alike, compare as they are).
func exitFilter() []bpf.Instruction {
	const (
		what = nlmsgHdrLen + cnMsgLen // the proc_event's what
		pid  = what + 16              // the exit's process_pid, then process_tgid
		tgid = pid + 4
	)
	exit := binary.BigEndian.Uint32(binary.NativeEndian.AppendUint32(nil, procEventExit))
	return []bpf.Instruction{
		bpf.LoadAbsolute{Off: what, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: exit, SkipTrue: 5},
		bpf.LoadAbsolute{Off: tgid, Size: 4},
		bpf.TAX{},
		bpf.LoadAbsolute{Off: pid, Size: 4},
		bpf.JumpIfX{Cond: bpf.JumpNotEqual, SkipTrue: 1},
		bpf.RetConstant{Val: math.MaxUint32}, // keep it whole
		bpf.RetConstant{Val: 0},              // drop it (also what is too short to hold the fields)
	}
}

// filterExits attaches exitFilter to socket fd.
func filterExits(fd int) error {
	raw, err := bpf.Assemble(exitFilter())
	if err != nil {
		return fmt.Errorf("assemble the process events' filter: %w", err)
	}
	prog := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		prog[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]} // #nosec G115 -- 8 instructions
	if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &fprog); err != nil {
		return fmt.Errorf("filter process events: %w", err)
	}
	return nil
}

// read takes the connector's messages until ctx ends, handing the exit
// status of each watched process to its waiter.
func (w *Watcher) read(ctx context.Context, fd int) {
	defer unix.Close(fd)
	// A blocking socket, read by this goroutine on a thread of its own
	// (one per daemon), waking each second to see whether ctx ended.
	tv := unix.Timeval{Sec: 1}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		w.log.Warn("process events: the connector stopped", "error", err)
		return
	}
	buf := make([]byte, 64<<10)
	for ctx.Err() == nil {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		switch {
		case errors.Is(err, unix.ENOBUFS):
			w.log.Warn("process events were lost (the connector's socket overran): an exit may be seen without how it ended")
			continue
		case errors.Is(err, unix.EINTR), errors.Is(err, unix.EAGAIN):
			continue
		case err != nil || n == 0:
			if ctx.Err() == nil {
				w.log.Warn("process events: the connector stopped", "error", err)
			}
			return
		}
		w.deliver(buf[:n])
	}
}

// deliver hands the exits in one datagram (netlink messages, each a
// connector message with a proc_event) to their waiters.
func (w *Watcher) deliver(b []byte) {
	for len(b) >= nlmsgHdrLen {
		size := int(binary.NativeEndian.Uint32(b[0:]))
		if size < nlmsgHdrLen || size > len(b) {
			return
		}
		msg := b[nlmsgHdrLen:size]
		b = b[(size+3)&^3:]
		if len(msg) < cnMsgLen+32 {
			continue
		}
		ev := msg[cnMsgLen:]
		// proc_event: what, cpu, timestamp_ns, then for an exit: pid,
		// tgid, exit_code (a wait status), exit_signal, parent pid, tgid.
		if binary.NativeEndian.Uint32(ev[0:]) != procEventExit {
			continue
		}
		pid := int(binary.NativeEndian.Uint32(ev[16:]))
		tgid := int(binary.NativeEndian.Uint32(ev[20:]))
		if pid != tgid {
			continue // a thread, not the process
		}
		w.mu.Lock()
		box := w.watched[pid]
		w.mu.Unlock()
		if box != nil {
			box.put(fromWaitStatus(unix.WaitStatus(binary.NativeEndian.Uint32(ev[24:]))))
		}
	}
}

func fromWaitStatus(ws unix.WaitStatus) Exit {
	if ws.Signaled() {
		return Exit{Known: true, Signal: ws.Signal()}
	}
	return Exit{Known: true, Code: ws.ExitStatus()}
}
