package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hutchdev/hutch/client"
)

// Row (q): density. Idle sandboxes are created one after another on a
// daemon of its own without a warm pool, -density-runc under runc and then
// -density-gvisor under gVisor, and left running (an idle timeout of an
// hour keeps the daemon from suspending them). At checkpoints as the count
// grows the row reads:
//
//   - the median of the last densityWindow creates (POST /v1/sandboxes),
//     after cfg.warmup untimed creates deleted at once, so that the first
//     checkpoint is not a cold start;
//   - the host's memory in use per sandbox: MemTotal − MemAvailable now,
//     less the same before the first create, divided by the count;
//   - the daemon's RSS;
//   - the floor: densityFloorN runs of the runtime alone (`runc run`,
//     `runsc run` of the same container, as row (a) and (d) run it) beside
//     the idle sandboxes, whose own growth (the kernel's work for every
//     process and mount on the host) no create can avoid.
//
// At the end every sandbox must answer an exec of `true`, then all are
// deleted and the leak census (census.go) must find nothing left. The
// target is the issue's: a create at the last count within 1.1× of one at
// the first checkpoint.

// densityWindow is how many creates, ending at a checkpoint, its median
// is taken of.
const densityWindow = 10

// densityFloorN is how many runs of the runtime alone each checkpoint
// times.
const densityFloorN = 5

// densityWorkers is how many execs or deletes run at once at the end.
const densityWorkers = 8

// densityTarget is the most a create at the last count may take, as a
// ratio to one at the first checkpoint.
const densityTarget = 1.1

// densityIdle is the idle timeout of the row's sandboxes, in seconds:
// longer than the row, so that none is suspended while it runs.
const densityIdle = 3600

// densityMarks are the counts, by runtime, at which the row reads its
// figures, when the run reaches them.
var densityMarks = map[string][]int{
	"runc":   {10, 100, 250, 500, 750, 1000},
	"gvisor": {10, 100, 200, 300},
}

// densityMark is what row (q) read at one checkpoint.
type densityMark struct {
	count      int
	creates    []time.Duration // the creates ending at count, at most densityWindow
	perSandbox int64           // the host's memory in use, grown since the first create, per sandbox
	daemonRSS  int64
	floor      []time.Duration // the runtime alone, beside the count's sandboxes
}

// measureDensity is row (q).
func (b *bench) measureDensity(ctx context.Context) (_ section, err error) {
	dir := filepath.Join(b.dir, "density")
	// #nosec G301 -- runc reaches sandbox roots through it from their user namespaces
	if err := os.Mkdir(dir, 0o711); err != nil {
		return section{}, err
	}
	d, err := startDaemon(ctx, b.cfg.hutch, b.runsc, dir, "--pool", "base=0")
	if d != nil {
		defer func() { err = errors.Join(err, d.stop()) }()
		defer func() { err = errors.Join(err, cleanup(ctx, d.deleteAll)) }()
	}
	if err != nil {
		return section{}, err
	}
	counts := map[string]int{"runc": b.cfg.densityRunc}
	runtimes := []string{"runc"}
	if b.runsc != "" && b.cfg.densityGvisor > 0 {
		runtimes, counts["gvisor"] = append(runtimes, "gvisor"), b.cfg.densityGvisor
	}
	s := section{title: fmt.Sprintf("(q) density: idle sandboxes created one after another, the median of the last %d creates", densityWindow)}
	for _, rt := range runtimes {
		rows, results, err := b.measureDensityOf(ctx, d, rt, counts[rt])
		if err != nil {
			return section{}, fmt.Errorf("(q) density, %s: %w", rt, err)
		}
		s.rows, s.results = append(s.rows, rows...), append(s.results, results...)
	}
	return s, nil
}

// measureDensityOf is row (q) for one runtime: n sandboxes created,
// execed in and deleted, and the census before and after.
func (b *bench) measureDensityOf(ctx context.Context, d *daemon, rt string, n int) (_ []row, _ []result, err error) {
	ids := map[string]bool{} // every sandbox made, for the census
	create := func(ctx context.Context) (string, time.Duration, error) {
		start := time.Now()
		sb, err := d.client.CreateSandbox(ctx, client.CreateSandboxRequest{Runtime: rt, IdleTimeoutS: densityIdle})
		took := time.Since(start)
		if err != nil {
			return "", took, fmt.Errorf("create sandbox: %w", err)
		}
		ids[sb.ID] = true
		return sb.ID, took, nil
	}
	for i := range b.cfg.warmup {
		b.showProgress("(q) density, %s: warm-up create %d/%d", rt, i+1, b.cfg.warmup)
		id, _, err := create(ctx)
		if err != nil {
			return nil, nil, err
		}
		if err := deleteSandbox(ctx, d.client, id); err != nil {
			return nil, nil, err
		}
	}
	ref, err := b.reference(ctx, rt)
	if err != nil {
		return nil, nil, err
	}
	defer ref.close()
	alone := b.runcRun
	if rt == "gvisor" {
		alone = b.runscRun
	}
	before, err := b.takeCensus(ctx, d, ids)
	if err != nil {
		return nil, nil, err
	}
	used, err := hostUsed()
	if err != nil {
		return nil, nil, err
	}

	// The sandboxes still to delete, should the row end early.
	var live []string
	defer func() {
		if len(live) > 0 {
			err = errors.Join(err, b.deleteEach(ctx, d, rt, live))
		}
	}()
	checkpoints := marksUpTo(densityMarks[rt], n)
	var creates []time.Duration
	var marks []densityMark
	for i := range n {
		b.showProgress("(q) density, %s: creating sandbox %d/%d", rt, i+1, n)
		id, took, err := create(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("at %d sandboxes: %w", i, err)
		}
		live, creates = append(live, id), append(creates, took)
		if slices.Contains(checkpoints, len(live)) {
			m, err := readMark(ctx, d, creates, used)
			if err != nil {
				return nil, nil, err
			}
			for j := range densityFloorN {
				took, err := alone(ctx, ref, len(live)*densityFloorN+j)
				if err != nil {
					return nil, nil, fmt.Errorf("the runtime alone at %d sandboxes: %w", len(live), err)
				}
				m.floor = append(m.floor, took)
			}
			marks = append(marks, m)
		}
	}
	b.endProgress()

	answered, execErr := b.execEach(ctx, d, rt, live)
	deleteErr := b.deleteEach(ctx, d, rt, live)
	live = nil
	var leakErr error
	if deleteErr == nil { // else the census would only count what was not deleted
		leakErr = b.checkNothingLeft(ctx, d, ids, before)
	}
	if err := errors.Join(execErr, deleteErr, leakErr); err != nil {
		return nil, nil, err
	}
	rows, results := densityRows(rt, marks, answered, n)
	return rows, results, nil
}

// marksUpTo are the checkpoints of a run of n sandboxes: the marks up to
// n, and n.
func marksUpTo(marks []int, n int) []int {
	var out []int
	for _, m := range marks {
		if m < n {
			out = append(out, m)
		}
	}
	return append(out, n)
}

// readMark reads a checkpoint's figures once the sandboxes just made have
// settled: the last creates, the host's memory in use beyond used per
// sandbox, and the daemon's RSS.
func readMark(ctx context.Context, d *daemon, creates []time.Duration, used int64) (densityMark, error) {
	m := densityMark{count: len(creates), creates: slices.Clone(creates[max(0, len(creates)-densityWindow):])}
	select {
	case <-ctx.Done():
		return m, ctx.Err()
	case <-time.After(settle):
	}
	now, err := hostUsed()
	if err != nil {
		return m, err
	}
	m.perSandbox = (now - used) / int64(m.count)
	if m.daemonRSS, err = d.rss(); err != nil {
		return m, fmt.Errorf("daemon RSS: %w", err)
	}
	return m, nil
}

// hostUsed is the host's memory in use: MemTotal less MemAvailable.
func hostUsed() (int64, error) {
	total, err := kBField("/proc/meminfo", "MemTotal")
	if err != nil {
		return 0, err
	}
	available, err := kBField("/proc/meminfo", "MemAvailable")
	return total - available, err
}

// execEach runs `true` in every sandbox, densityWorkers at a time, and
// returns how many answered with exit 0, and an error saying which did
// not.
func (b *bench) execEach(ctx context.Context, d *daemon, rt string, ids []string) (int, error) {
	errs := b.eachOf(ids, fmt.Sprintf("(q) density, %s: exec true", rt), func(id string) error {
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		res, err := d.client.Exec(ctx, id, client.ExecRequest{Cmd: []string{"true"}})
		switch {
		case err != nil:
			return fmt.Errorf("exec true in %s: %w", id, err)
		case res.ExitCode != 0:
			return fmt.Errorf("exec true in %s: exit %d, %q", id, res.ExitCode, res.Stderr)
		}
		return nil
	})
	return len(ids) - len(errs), summarize(errs, len(ids), "did not answer an exec")
}

// deleteEach deletes every sandbox, densityWorkers at a time, even after
// a ^C (deleteSandbox gives each its own time).
func (b *bench) deleteEach(ctx context.Context, d *daemon, rt string, ids []string) error {
	errs := b.eachOf(ids, fmt.Sprintf("(q) density, %s: delete", rt), func(id string) error {
		return deleteSandbox(ctx, d.client, id)
	})
	return summarize(errs, len(ids), "were not deleted")
}

// eachOf runs fn on every id, densityWorkers at a time, showing progress,
// and returns the errors.
func (b *bench) eachOf(ids []string, title string, fn func(id string) error) []error {
	jobs := make(chan string)
	var mu sync.Mutex
	var errs []error
	done := 0
	var wg sync.WaitGroup
	for range densityWorkers {
		wg.Go(func() {
			for id := range jobs {
				err := fn(id)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				}
				done++
				b.showProgress("%s: %d/%d", title, done, len(ids))
				mu.Unlock()
			}
		})
	}
	for _, id := range ids {
		jobs <- id
	}
	close(jobs)
	wg.Wait()
	b.endProgress()
	return errs
}

// summarize is one error for the errs of n sandboxes, with the first few
// in full; nil for none.
func summarize(errs []error, n int, what string) error {
	if len(errs) == 0 {
		return nil
	}
	first := make([]string, 0, 3)
	for _, err := range errs[:min(len(errs), 3)] {
		first = append(first, err.Error())
	}
	return fmt.Errorf("%d of %d sandboxes %s; the first: %s", len(errs), n, what, strings.Join(first, "; "))
}

// checkNothingLeft takes the census after the deletes and compares it
// with before: any count that grew is a leak, and an error.
func (b *bench) checkNothingLeft(ctx context.Context, d *daemon, ids map[string]bool, before census) error {
	// The daemon's ends of the execs' connections close, as in the soak.
	d.client.CloseIdleConnections()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Second):
	}
	// The disk pool empties and releases the spares the deletes gave
	// back for a while after the last (each an unmount and a loop
	// device's detach): what is left past settleWait is a leak.
	const settleWait = 15 * time.Second
	var after census
	var err error
	for deadline := time.Now().Add(settleWait); ; time.Sleep(250 * time.Millisecond) {
		if after, err = b.takeCensus(ctx, d, ids); err != nil {
			return err
		}
		if len(leaks(before, after)) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if leaked := leaks(before, after); len(leaked) > 0 {
		var w strings.Builder
		printCensus(&w, before, after)
		return fmt.Errorf("left behind after deleting them all: %s%s", strings.Join(leaked, "; "), w.String())
	}
	return nil
}

// densityRows are row (q)'s lines for one runtime, in the printed table
// and in docs/performance.md: a create and the memory per sandbox at each
// checkpoint, the last create's ratio to the first's, and how many
// answered an exec at the end.
func densityRows(rt string, marks []densityMark, answered, n int) ([]row, []result) {
	alone := map[string]string{"runc": "runc run", "gvisor": "runsc run"}[rt]
	var rows []row
	for _, m := range marks {
		rows = append(rows,
			durationRow(fmt.Sprintf("%s: create at %s sandboxes", rt, fmtCount(int64(m.count))), m.creates),
			durationRow("  "+alone+" beside them (the floor)", m.floor),
			row{label: "  host memory per sandbox", median: fmtBytes(m.perSandbox), n: "1"},
			row{label: "  daemon RSS", median: fmtBytes(m.daemonRSS), n: "1"},
		)
	}
	first, last := marks[0], marks[len(marks)-1]
	firstCreate, lastCreate := median(first.creates), median(last.creates)
	r := ratio(lastCreate, firstCreate)
	floorRatio := ratio(median(last.floor), median(first.floor))
	met := r <= densityTarget
	at := "create at " + fmtCount(int64(first.count))
	want := fmt.Sprintf("≤ %.1f×", densityTarget)
	rows = append(rows,
		row{label: fmt.Sprintf("%s: ratio create at %s / %s", rt, fmtCount(int64(last.count)), at), median: fmtRatio(r),
			target: target(met, want+" "+at)},
		row{label: fmt.Sprintf("%s: ratio %s at %s / at %s (the floor's own)", rt, alone, fmtCount(int64(last.count)), fmtCount(int64(first.count))),
			median: fmtRatio(floorRatio)},
		row{label: rt + ": answered an exec at the end", median: fmt.Sprintf("%d of %d", answered, n), n: strconv.Itoa(n)},
	)
	name := map[string]string{"runc": "runc", "gvisor": "gVisor"}[rt]
	res := result{ID: "q/" + rt, Topic: topicMemory,
		What:  fmt.Sprintf("create at %s idle sandboxes, %s, one after another", fmtCount(int64(last.count)), name),
		Hutch: durationFig("", lastCreate),
		Peers: []figure{durationFig(at, firstCreate), durationFig(alone+" at "+fmtCount(int64(last.count)), median(last.floor)),
			durationFig(alone+" at "+fmtCount(int64(first.count)), median(first.floor))},
		Ratio: []term{ratioTerm(r, at).with(met, want), ratioTerm(floorRatio, alone+"'s own growth")},
	}
	res.Hutch.Text += fmt.Sprintf(" (host memory per sandbox %s; all answering an exec, all deleted with nothing left)", fmtBytes(last.perSandbox))
	return rows, []result{res}
}
