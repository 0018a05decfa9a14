package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/test/neighbor"
)

// The soak (make soak): sandbox lifecycles by concurrent clients against
// a daemon of its own, with hostile workloads in a share of them, and a
// leak census before and after. It prints each operation's latency
// percentiles, the errors by code, the lifecycles a second of each phase,
// and the census; any error, failed check or leak fails it.
//
// Phases, each by c clients at once:
//
//  1. create → exec → delete under runc, the lifecycle of a "run code"
//     tool (what the issue measured at ~15 a second with 20 clients);
//  2. full lifecycles under runc: create, exec, write a file and read it
//     back, start a background process and list it, for a share suspend
//     and wake it with an exec that reads the file again (an acknowledged
//     write kept), for a share one hostile workload (fork bomb, memory
//     bomb, output flood, disk fill) before the rest, then delete;
//  3. the same under gVisor, fewer (a gVisor create costs a second of CPU
//     here).

// soakConfig is the soak's part of the command line.
type soakConfig struct {
	n       int     // full lifecycles under runc; the create/exec/delete phase has as many
	c       int     // concurrent clients
	gvisor  float64 // gVisor's full lifecycles, as a share of n
	hostile float64 // share of full lifecycles with a hostile workload
	suspend float64 // share of full lifecycles suspended and woken
}

// soak is one run.
type soak struct {
	b   *bench
	cfg soakConfig

	mu      sync.Mutex
	ids     map[string]bool            // every sandbox made, for the census
	latency map[string][]time.Duration // by operation
	errs    map[string]int             // by code (or "check", "transport")
	samples []string                   // the first few errors in full

	floorSeq atomic.Int64 // names the floors' containers
}

// hostile workloads, each a shell command that must end (by itself, its
// limit or its timeout) and leave the sandbox answering. Their sandboxes
// have small limits: 128 MiB, 64 processes, 256 MiB of disk.
var hostile = []struct{ name, command string }{
	{"fork bomb", `f(){ f | f & }; f; sleep 3`},
	{"memory bomb", `head -c 1000m /dev/zero | tail`},
	{"output flood", `yes | head -c 50000000`},
	{"disk fill", `dd if=/dev/zero of=fill bs=1M count=400 2>&1 | tail -1; rm -f fill`},
}

// runSoak runs the soak with a daemon of its own and prints its report.
func runSoak(ctx context.Context, cfg config, out io.Writer) (err error) {
	b := &bench{cfg: cfg, tty: isTerminal(os.Stderr)}
	if err := b.checkTools(); err != nil {
		return err
	}
	base, err := os.MkdirTemp("/tmp", "hs")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, removeBase(base)) }()
	before := neighbor.Take(b.runsc)
	defer func() { err = errors.Join(err, neighbor.Take(b.runsc).Since(before)) }()
	if err := os.Chmod(base, 0o711); err != nil {
		return err
	}
	// The runc peer of the floor phase: its bundles, state root and
	// cgroups of its own, as in make bench.
	b.cgroupParent = "hutch-soak-" + strconv.Itoa(os.Getpid())
	b.dir, b.runcRoot = filepath.Join(base, "b"), filepath.Join(base, "b", "runc")
	if err := errors.Join(os.Mkdir(b.dir, 0o711), os.Mkdir(b.runcRoot, 0o700)); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, cleanup(ctx, b.cleanupRunc)) }()
	b.d, err = startDaemon(ctx, cfg.hutch, b.runsc, base, "--pool", "base=0")
	if b.d != nil {
		defer func() { err = errors.Join(err, b.d.stop()) }()
		defer func() { err = errors.Join(err, cleanup(ctx, b.d.deleteAll)) }()
	}
	if err != nil {
		return err
	}
	s := &soak{b: b, cfg: cfg.soak, ids: map[string]bool{}, latency: map[string][]time.Duration{}, errs: map[string]int{}}
	return s.run(ctx, out)
}

func (s *soak) run(ctx context.Context, out io.Writer) error {
	var head strings.Builder
	printHeader(&head, collectHostInfo(ctx, s.b.runc, s.b.runsc, s.b.d.version, s.b.cfg.hutch))
	fmt.Fprintf(&head, "soak: %d lifecycles of each runc phase, %d under gVisor, by %d clients; %.0f%% hostile, %.0f%% suspended\n\n",
		s.cfg.n, s.gvisorN(), s.cfg.c, 100*s.cfg.hostile, 100*s.cfg.suspend)
	if _, err := io.WriteString(out, head.String()); err != nil {
		return err
	}
	// A warm-up, so that the census before sees what a used daemon
	// holds (its disk pool, its connections' goroutines).
	for _, rt := range s.runtimes() {
		if err := s.fullLifecycle(ctx, rt, 1); err != nil {
			return fmt.Errorf("warm-up under %s: %w", rt, err)
		}
	}
	s.latency, s.errs = map[string][]time.Duration{}, map[string]int{}
	before, err := s.b.takeCensus(ctx, s.b.d, s.knownIDs())
	if err != nil {
		return err
	}
	var report strings.Builder
	phases := []struct {
		name    string
		n       int
		runtime string
		full    bool
	}{
		{"create → exec → delete, runc", s.cfg.n, "runc", false},
		{"full lifecycles, runc", s.cfg.n, "runc", true},
	}
	if s.b.runsc != "" {
		phases = append(phases, struct {
			name    string
			n       int
			runtime string
			full    bool
		}{"full lifecycles, gVisor", s.gvisorN(), "gvisor", true})
	} else {
		fmt.Fprintln(&report, "no gVisor phase: runsc is not beside the hutch binary nor in PATH (make runsc)")
	}
	var plain float64          // the create → exec → delete phase's rate
	var plainCPU time.Duration // and the machine's CPU per lifecycle
	var floorsBefore, floorsAfter [len(floorKinds)]floorRun
	pid := s.b.d.cmd.Process.Pid
	for _, p := range phases {
		if !p.full {
			if floorsBefore, err = s.runFloors(ctx); err != nil {
				return err
			}
		}
		cpuBefore, cpuErr := readCPU(pid)
		began := time.Now()
		s.latency = map[string][]time.Duration{}
		s.parallel(ctx, p.name, p.n, func(i int) error {
			if p.full {
				return s.fullLifecycle(ctx, p.runtime, i)
			}
			return s.plainLifecycle(ctx, p.runtime)
		})
		took := time.Since(began)
		rate := float64(p.n) / took.Seconds()
		if !p.full {
			plain = rate
		}
		fmt.Fprintf(&report, "%s: %d lifecycles in %s, %.1f a second\n", p.name, p.n, took.Round(time.Millisecond), rate)
		if cpuAfter, err := readCPU(pid); err == nil && cpuErr == nil {
			per := cpuBefore.perEach(cpuAfter, p.n)
			fmt.Fprintf(&report, "  CPU per lifecycle: %s of the machine's (the clients', the runtime's, the sandboxes' and the kernel's too), of which the daemon's own %s\n",
				fmtDuration(per.machine), fmtDuration(per.process))
			if !p.full {
				plainCPU = per.machine
			}
		}
		s.printLatency(&report)
		if err := ctx.Err(); err != nil {
			return err
		}
		if !p.full {
			if floorsAfter, err = s.runFloors(ctx); err != nil {
				return err
			}
		}
	}
	s.printFloors(&report, floorsBefore, floorsAfter, plain, plainCPU)
	s.b.d.client.CloseIdleConnections()
	time.Sleep(time.Second) // the daemon's ends of those connections close
	after, err := s.b.takeCensus(ctx, s.b.d, s.knownIDs())
	if err != nil {
		return err
	}
	printCensus(&report, before, after)
	failed := s.printErrors(&report)
	leaked := leaks(before, after)
	switch {
	case failed > 0 && len(leaked) > 0:
		fmt.Fprintf(&report, "\nsoak FAILED: %d errors, and leaks: %s\n", failed, strings.Join(leaked, "; "))
	case failed > 0:
		fmt.Fprintf(&report, "\nsoak FAILED: %d errors\n", failed)
	case len(leaked) > 0:
		fmt.Fprintf(&report, "\nsoak FAILED: leaks: %s\n", strings.Join(leaked, "; "))
	default:
		fmt.Fprintf(&report, "\nsoak passed: no error, nothing leaked\n")
	}
	if _, err := io.WriteString(out, report.String()); err != nil {
		return err
	}
	if failed > 0 || len(leaked) > 0 {
		return errors.New("the soak failed")
	}
	return nil
}

// floorN bounds each floor's lifecycles: its rate is steady well before
// the soak's count.
const floorN = 500

// The runtime's floors, run beside the create → exec → delete phase by as
// many clients, on the very container Hutch runs (the bundle of one of its
// sandboxes, made afresh each time: overlay, idmapped clones, config)
// started with runc alone and then deleted:
//
//   - running echo to its first output, runc run as a user runs it: what
//     the runtime and the kernel cost for the same isolation, with none of
//     Hutch's (API, store, disk image, network, agent);
//   - keeping the agent as its process, handed its socket as Hutch hands
//     it, until the agent answers, runc started as Hutch starts it (given
//     the daemon's timer slack, see timerslack): the runtime's and the
//     agent's share, so that what Hutch spends above it is the daemon's
//     (API, store, disk image, network);
//   - the first, runc started as Hutch starts it: the runtime as Hutch
//     runs it, so that Hutch's ratio to it is its own overhead's, whatever
//     the slack saves runc.
//
// Each runs just before the phase and just after it, and Hutch is compared
// with the mean of the two: this host's pace drifts by a fifth within
// minutes, and a drift through the phase weighs on both sides alike.
var floorKinds = [3]struct {
	name, what string
	run        func(*bench, context.Context, *reference, int) (time.Duration, error)
}{
	{"runc alone", "the same container (run echo to its output, delete)", (*bench).runcRun},
	{"runc alone with the agent", "the same container with the agent as its process (until it answers, delete), runc given the 1 ms of timer slack Hutch gives the runc it starts", asHutchRuns((*bench).runcAgentReady)},
	{"runc alone given Hutch's timer slack", "runc alone, runc given the 1 ms of timer slack Hutch gives the runc it starts", asHutchRuns((*bench).runcRun)},
}

// floorRun is one run of a floor: its rate, the machine's CPU per
// lifecycle, and the runtime's start (what Hutch's create compares with)
// and whole lifecycle, each time.
type floorRun struct {
	n                int
	took             time.Duration
	cpu              time.Duration
	start, lifecycle []time.Duration
}

func (f floorRun) rate() float64 { return float64(f.n) / f.took.Seconds() }

// runFloors runs each floor once, with a reference bundle of its own
// (removed before the census after).
func (s *soak) runFloors(ctx context.Context) (runs [len(floorKinds)]floorRun, err error) {
	ref, err := s.b.reference(ctx, "runc")
	if err != nil {
		return runs, err
	}
	defer ref.close()
	n := min(s.cfg.n, floorN)
	for i, kind := range floorKinds {
		f := &runs[i]
		f.n = n
		var mu sync.Mutex
		cpuBefore, cpuErr := readCPU(os.Getpid())
		began := time.Now()
		s.parallel(ctx, kind.name, n, func(int) error {
			t0 := time.Now()
			d, err := kind.run(s.b, ctx, ref, int(s.floorSeq.Add(1)))
			if err == nil {
				mu.Lock()
				f.start, f.lifecycle = append(f.start, d), append(f.lifecycle, time.Since(t0))
				mu.Unlock()
			}
			return err
		})
		f.took = time.Since(began)
		if cpuAfter, err := readCPU(os.Getpid()); err == nil && cpuErr == nil {
			f.cpu = cpuBefore.perEach(cpuAfter, n).machine
		}
		if err := ctx.Err(); err != nil {
			return runs, err
		}
	}
	return runs, nil
}

// printFloors writes each floor's runs before and after the create → exec
// → delete phase (plain, its rate; plainCPU, its CPU per lifecycle): the
// rates and their mean, the CPU per lifecycle, the percentiles of the
// runtime's start and of the whole lifecycle under as many clients (beside
// Hutch's create and lifecycle), and Hutch's ratios to the means.
func (s *soak) printFloors(w *strings.Builder, before, after [len(floorKinds)]floorRun, plain float64, plainCPU time.Duration) {
	var rates [len(floorKinds)]float64
	var cpus [len(floorKinds)]time.Duration
	for i, kind := range floorKinds {
		b, a := before[i], after[i]
		rates[i] = (b.rate() + a.rate()) / 2
		cpus[i] = (b.cpu + a.cpu) / 2
		fmt.Fprintf(w, "floor: %s, %s, %d clients: %d before the phase and %d after, %.1f and %.1f a second, %.1f on average\n",
			kind.name, kind.what, s.cfg.c, b.n, a.n, b.rate(), a.rate(), rates[i])
		fmt.Fprintf(w, "  CPU per lifecycle: %s of the machine's\n", fmtDuration(cpus[i]))
		start, lifecycle := append(slices.Clone(b.start), a.start...), append(slices.Clone(b.lifecycle), a.lifecycle...)
		if len(start) > 0 {
			// What Hutch's create and lifecycle percentiles compare with:
			// under as many clients, each waits its turn here too.
			fmt.Fprintf(w, "  the runtime's start (Hutch's create) p50 / p99: %s / %s; lifecycle: %s / %s\n",
				fmtDuration(percentile(start, 0.5)), fmtDuration(percentile(start, 0.99)),
				fmtDuration(percentile(lifecycle, 0.5)), fmtDuration(percentile(lifecycle, 0.99)))
		}
	}
	var ratios, overs []string
	for i, kind := range floorKinds {
		ratios = append(ratios, fmt.Sprintf("/ %s: %.2f", kind.name, plain/rates[i]))
		if plainCPU > 0 && cpus[i] > 0 {
			// The rates' ratio is the CPU's upside down on a machine kept
			// busy: where Hutch's extra time goes is read here.
			overs = append(overs, fmt.Sprintf("over %s: %+.2f ms (%.2f×)", kind.name, float64(plainCPU-cpus[i])/1e6, float64(plainCPU)/float64(cpus[i])))
		}
	}
	fmt.Fprintf(w, "  create → exec → delete through Hutch %s\n", strings.Join(ratios, "; "))
	if len(overs) == len(floorKinds) {
		fmt.Fprintf(w, "  CPU per lifecycle, Hutch's %s\n", strings.Join(overs, "; "))
	}
	fmt.Fprintln(w)
}

func (s *soak) gvisorN() int { return max(1, int(float64(s.cfg.n)*s.cfg.gvisor)) }

func (s *soak) runtimes() []string {
	if s.b.runsc == "" {
		return []string{"runc"}
	}
	return []string{"runc", "gvisor"}
}

func (s *soak) knownIDs() map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.ids)
}

// parallel runs n lifecycles by the soak's clients, counting their errors.
func (s *soak) parallel(ctx context.Context, name string, n int, lifecycle func(i int) error) {
	jobs := make(chan int)
	var wg sync.WaitGroup
	done := 0
	for range s.cfg.c {
		wg.Go(func() {
			for i := range jobs {
				if err := lifecycle(i); err != nil {
					s.fail(err)
				}
				s.mu.Lock()
				done++
				s.b.showProgress("soak, %s: %d/%d", name, done, n)
				s.mu.Unlock()
			}
		})
	}
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	s.b.endProgress()
}

// timed runs one operation, recording how long it took.
func (s *soak) timed(op string, fn func(ctx context.Context) error, ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	began := time.Now()
	err := fn(ctx)
	d := time.Since(began)
	s.mu.Lock()
	s.latency[op] = append(s.latency[op], d)
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

// checkErr is a lifecycle's check that failed (not an API error).
type checkErr struct{ msg string }

func (e checkErr) Error() string { return e.msg }

func checkf(format string, args ...any) error { return checkErr{fmt.Sprintf(format, args...)} }

// fail counts a lifecycle's error by its code.
func (s *soak) fail(err error) {
	code := "transport"
	var ae *client.Error
	var ce checkErr
	switch {
	case errors.As(err, &ae):
		code = fmt.Sprintf("%s (%d)", ae.Code, ae.StatusCode)
	case errors.As(err, &ce):
		code = "check"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errs[code]++
	if len(s.samples) < 10 {
		s.samples = append(s.samples, err.Error())
	}
}

// create makes a sandbox, remembered for the census.
func (s *soak) create(ctx context.Context, req client.CreateSandboxRequest) (*client.Sandbox, error) {
	var sb *client.Sandbox
	err := s.timed("create", func(ctx context.Context) (err error) {
		sb, err = s.b.d.client.CreateSandbox(ctx, req)
		return err
	}, ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.ids[sb.ID] = true
	s.mu.Unlock()
	return sb, nil
}

func (s *soak) delete(ctx context.Context, id string) error {
	return s.timed("delete", func(ctx context.Context) error { return s.b.d.client.DeleteSandbox(ctx, id) }, context.WithoutCancel(ctx))
}

func (s *soak) exec(ctx context.Context, op, id string, req client.ExecRequest) (*client.ExecResult, error) {
	var res *client.ExecResult
	err := s.timed(op, func(ctx context.Context) (err error) {
		res, err = s.b.d.client.Exec(ctx, id, req)
		return err
	}, ctx)
	return res, err
}

// plainLifecycle is create → exec → delete.
func (s *soak) plainLifecycle(ctx context.Context, runtime string) (err error) {
	began := time.Now()
	sb, err := s.create(ctx, client.CreateSandboxRequest{Runtime: runtime})
	if err != nil {
		return err
	}
	defer func() {
		err = errors.Join(err, s.delete(ctx, sb.ID))
		s.record("lifecycle", time.Since(began))
	}()
	res, err := s.exec(ctx, "exec", sb.ID, client.ExecRequest{Cmd: []string{"echo", "hi"}})
	if err == nil && res.Stdout != "hi\n" {
		err = checkf("exec echo hi in %s: %q, exit %d", sb.ID, res.Stdout, res.ExitCode)
	}
	return err
}

func (s *soak) record(op string, d time.Duration) {
	s.mu.Lock()
	s.latency[op] = append(s.latency[op], d)
	s.mu.Unlock()
}

// fullLifecycle is lifecycle i of a full phase (see the package comment).
func (s *soak) fullLifecycle(ctx context.Context, runtime string, i int) (err error) {
	began := time.Now()
	share := func(f float64) bool { return f > 0 && i%max(1, int(1/f)) == 0 }
	req := client.CreateSandboxRequest{Runtime: runtime}
	bad := -1
	if share(s.cfg.hostile) {
		bad = (i / max(1, int(1/s.cfg.hostile))) % len(hostile)
		req.MemoryMB, req.Pids, req.DiskMB = 128, 64, 256
	}
	sb, err := s.create(ctx, req)
	if err != nil {
		return err
	}
	defer func() {
		err = errors.Join(err, s.delete(ctx, sb.ID))
		s.record("lifecycle", time.Since(began))
	}()
	c := s.b.d.client
	if bad >= 0 {
		h := hostile[bad]
		if _, err := s.exec(ctx, "hostile: "+h.name, sb.ID, client.ExecRequest{Command: h.command, TimeoutS: 20}); err != nil {
			return err
		}
	}
	res, err := s.exec(ctx, "exec", sb.ID, client.ExecRequest{Cmd: []string{"echo", "hi"}})
	if err != nil {
		return err
	}
	if res.Stdout != "hi\n" {
		return checkf("exec echo hi in %s: %q, exit %d", sb.ID, res.Stdout, res.ExitCode)
	}
	text := randomText()
	if err := s.timed("write file", func(ctx context.Context) error {
		_, err := c.WriteFile(ctx, sb.ID, "soak.txt", strings.NewReader(text))
		return err
	}, ctx); err != nil {
		return err
	}
	if err := s.timed("read file", func(ctx context.Context) error {
		r, err := c.ReadFile(ctx, sb.ID, "soak.txt")
		if err != nil {
			return err
		}
		defer r.Close()
		b, err := io.ReadAll(r)
		if err == nil && string(b) != text {
			err = checkf("read back %d bytes of the %d written in %s", len(b), len(text), sb.ID)
		}
		return err
	}, ctx); err != nil {
		return err
	}
	if err := s.timed("start process", func(ctx context.Context) error {
		_, err := c.StartProcess(ctx, sb.ID, client.StartProcessRequest{Name: "bg", Cmd: []string{"sleep", "600"}})
		return err
	}, ctx); err != nil {
		return err
	}
	if err := s.timed("list processes", func(ctx context.Context) error {
		ps, err := c.ListProcesses(ctx, sb.ID)
		if err == nil && !slices.ContainsFunc(ps, func(p client.Process) bool { return p.Name == "bg" && p.Status == "running" }) {
			err = checkf("process bg not running in %s: %+v", sb.ID, ps)
		}
		return err
	}, ctx); err != nil {
		return err
	}
	if share(s.cfg.suspend) && !share(s.cfg.hostile) {
		if err := s.timed("suspend", func(ctx context.Context) error {
			_, err := c.SuspendSandbox(ctx, sb.ID)
			return err
		}, ctx); err != nil {
			return err
		}
		res, err := s.exec(ctx, "exec after suspend (wakes it)", sb.ID, client.ExecRequest{Cmd: []string{"cat", "soak.txt"}})
		if err != nil {
			return err
		}
		if res.Stdout != text {
			return checkf("after suspend and wake, %s has %d bytes of soak.txt, want the %d written", sb.ID, len(res.Stdout), len(text))
		}
	}
	return nil
}

func randomText() string {
	b := make([]byte, 512)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// printLatency writes each operation's percentiles.
func (s *soak) printLatency(w *strings.Builder) {
	fmt.Fprintf(w, "  %-34s %6s %9s %9s %9s %9s\n", "operation", "n", "p50", "p90", "p99", "max")
	for _, op := range slices.Sorted(maps.Keys(s.latency)) {
		v := s.latency[op]
		fmt.Fprintf(w, "  %-34s %6d %9s %9s %9s %9s\n", op, len(v), fmtDuration(percentile(v, 0.5)),
			fmtDuration(percentile(v, 0.9)), fmtDuration(percentile(v, 0.99)), fmtDuration(slices.Max(v)))
	}
	fmt.Fprintln(w)
}

// printErrors writes the errors by code, and returns how many there were.
func (s *soak) printErrors(w *strings.Builder) int {
	total := 0
	fmt.Fprintf(w, "\nerrors by code:")
	if len(s.errs) == 0 {
		fmt.Fprintf(w, " none\n")
	}
	for _, code := range slices.Sorted(maps.Keys(s.errs)) {
		fmt.Fprintf(w, "\n  %-30s %d", code, s.errs[code])
		total += s.errs[code]
	}
	if total > 0 {
		fmt.Fprintf(w, "\nthe first of them:\n  %s\n", strings.Join(s.samples, "\n  "))
		if logged := s.b.d.logErrors(10); len(logged) > 0 {
			fmt.Fprintf(w, "the daemon's log says:\n  %s\n", strings.Join(logged, "\n  "))
		}
	}
	return total
}
