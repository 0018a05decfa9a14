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
	"time"

	"github.com/hutchdev/hutch/client"
)

// Row (k) with a warm pool: what an E2B user sees when a sandbox is ready.
// The e2b SDK cannot ask for a runtime, so each runtime has a daemon of
// its own whose default it is (--runtime), with a pool of poolSize
// sandboxes of the host template: the E2B front's "base" is the daemon's
// default template ("host") when no template "base" is built, and the
// bench's daemons build none. The daemons run one after the other. Before
// each round the pool is waited for until it is full again and no deleted
// sandbox is being torn down (not timed): a round measures handing over,
// not refilling nor the last round's cleanup.
//
//   - create + echo hi: the e2b SDK's script against Hutch's own API, as
//     without a pool.
//   - an agent's first minute, as outside benchmarks run it: create, one
//     command of a few short processes, then node -v; against its floor,
//     the same two commands through Hutch's API in a sandbox already
//     running, the processes' own cost.

// minuteLoop is the agent's first command: a shell running 15 processes.
const minuteLoop = "for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15; do /bin/true; done"

// e2bMinuteScript times, per line it reads, Sandbox.create(), then
// commands.run(minuteLoop), then commands.run('node -v'), one after the
// other, and prints the whole in ms, then each part's; the sandbox is
// killed after the timing.
var e2bMinuteScript = `import { Sandbox } from 'e2b'
import readline from 'node:readline'
for await (const _ of readline.createInterface({ input: process.stdin })) {
  const t0 = performance.now()
  const sbx = await Sandbox.create()
  const t1 = performance.now()
  await sbx.commands.run(` + strconv.Quote(minuteLoop) + `)
  const t2 = performance.now()
  const r = await sbx.commands.run('node -v')
  const t3 = performance.now()
  await sbx.kill()
  if (!/^v[0-9]/.test(r.stdout)) throw new Error('node -v said ' + JSON.stringify(r.stdout))
  console.log(t3 - t0, t1 - t0, t2 - t1, t3 - t2)
}`

// sdkShell is how the e2b SDK's commands.run runs a command: a login bash.
func sdkShell(command string) []string { return []string{"/bin/bash", "-l", "-c", command} }

// Targets of row (k) with a warm pool (docs/performance.md).
const (
	e2bPoolTarget     = 30 * time.Millisecond // create + echo hi through the e2b SDK
	minuteRuncTarget  = 60 * time.Millisecond // the first minute under runc
	minuteGvisorRatio = 1.3                   // the first minute under gVisor, to its floor
)

// fmtTarget is a target time as docs/performance.md writes it ("≤ 30 ms").
func fmtTarget(d time.Duration) string { return fmt.Sprintf("≤ %d ms", d.Milliseconds()) }

// e2bPoolRun is what row (k) measured with a warm pool under one runtime:
// its rows, and its results of create + echo hi and of the first minute.
type e2bPoolRun struct {
	rows         []row
	echo, minute result
}

// measureE2BPool is row (k) with a warm pool under runtime rt, on a daemon
// of its own.
func (b *bench) measureE2BPool(ctx context.Context, sdk e2bSDK, rt string) (_ e2bPoolRun, err error) {
	n := b.cfg.createN
	if rt == "gvisor" {
		n = b.cfg.gvisorN
	}
	dir := filepath.Join(b.dir, "e2b-"+rt)
	// #nosec G301 -- runc reaches sandbox roots through it from their user namespaces
	if err := os.Mkdir(dir, 0o711); err != nil {
		return e2bPoolRun{}, err
	}
	d, err := startDaemon(ctx, b.cfg.hutch, b.runsc, dir, "--runtime", rt, "--pool", fmt.Sprintf("host@%s=%d", rt, poolSize))
	if d != nil {
		defer func() { err = errors.Join(err, d.stop()) }()
		defer func() { err = errors.Join(err, cleanup(ctx, d.deleteAll)) }()
	}
	if err != nil {
		return e2bPoolRun{}, err
	}
	settle := func(ctx context.Context) error { return waitSettled(ctx, d.client) }
	echoRows, echo, err := b.e2bPoolEcho(ctx, sdk, d, rt, n, settle)
	if err != nil {
		return e2bPoolRun{}, err
	}
	minuteRows, minute, err := b.e2bMinute(ctx, sdk, d, rt, n, settle)
	if err != nil {
		return e2bPoolRun{}, err
	}
	hits, creates, err := d.poolHits()
	if err != nil {
		return e2bPoolRun{}, err
	}
	rows := append(echoRows, minuteRows...)
	rows = append(rows, row{label: "sandboxes of this daemon handed over from its pool (its log)", median: fmt.Sprintf("%d of %d", hits, creates), n: strconv.Itoa(creates)})
	return e2bPoolRun{rows: rows, echo: echo, minute: minute}, nil
}

// e2bPoolEcho is create + echo hi through the e2b SDK and through Hutch's
// API on d, whose pool serves both.
func (b *bench) e2bPoolEcho(ctx context.Context, sdk e2bSDK, d *daemon, rt string, n int, settle func(context.Context) error) (_ []row, _ result, err error) {
	script, err := sdk.start(ctx, d, "e2b-echo-"+rt, e2bEchoScript)
	if err != nil {
		return nil, result{}, err
	}
	defer func() { err = errors.Join(err, script.close()) }()
	viaE2B, viaHutch := echoPeers(d.client, script, settle)
	if err := b.interleave(ctx, "(k) create and echo hi with a warm pool, "+rt, n, viaE2B.peer, viaHutch.peer); err != nil {
		return nil, result{}, err
	}
	rows, res := e2bPoolLines(rt, viaE2B, viaHutch, b.cfg.warmup)
	return rows, res, nil
}

// e2bMinute is the agent's first minute through the e2b SDK on d, against
// its floor: the same commands in a sandbox of d already running.
func (b *bench) e2bMinute(ctx context.Context, sdk e2bSDK, d *daemon, rt string, n int, settle func(context.Context) error) (_ []row, _ result, err error) {
	script, err := sdk.start(ctx, d, "e2b-minute-"+rt, e2bMinuteScript)
	if err != nil {
		return nil, result{}, err
	}
	defer func() { err = errors.Join(err, script.close()) }()
	var parts [3][]time.Duration // create, the loop, node -v
	viaE2B := &peer{name: "e2b SDK", run: func(ctx context.Context) (time.Duration, error) {
		if err := settle(ctx); err != nil {
			return 0, err
		}
		ts, err := script.round(4)
		if err != nil {
			return 0, err
		}
		for i := range parts {
			parts[i] = append(parts[i], ts[i+1])
		}
		return ts[0], nil
	}}
	running, err := d.client.CreateSandbox(ctx, client.CreateSandboxRequest{})
	if err != nil {
		return nil, result{}, err
	}
	defer func() { err = errors.Join(err, deleteSandbox(ctx, d.client, running.ID)) }()
	var floorParts [2][]time.Duration // the loop, node -v
	floor := &peer{name: "floor", run: func(ctx context.Context) (time.Duration, error) {
		if err := settle(ctx); err != nil {
			return 0, err
		}
		start := time.Now()
		for i, command := range []string{minuteLoop, "node -v"} {
			t := time.Now()
			res, err := d.client.Exec(ctx, running.ID, client.ExecRequest{Cmd: sdkShell(command)})
			switch {
			case err != nil:
				return 0, err
			case res.ExitCode != 0:
				return 0, fmt.Errorf("%s: exit code %d: %s", command, res.ExitCode, res.Stderr)
			}
			floorParts[i] = append(floorParts[i], time.Since(t))
		}
		return time.Since(start), nil
	}}
	if err := b.interleave(ctx, "(k) an agent's first minute with a warm pool, "+rt, n, viaE2B, floor); err != nil {
		return nil, result{}, err
	}
	rows, res := minuteLines(rt, viaE2B.samples, floor.samples, parts, floorParts, b.cfg.warmup)
	return rows, res, nil
}

// e2bPoolLines are the rows and the result of create + echo hi with a
// warm pool under rt.
func e2bPoolLines(rt string, viaE2B, viaHutch *createPeer, warmup int) ([]row, result) {
	e2b, own := median(viaE2B.samples), median(viaHutch.samples)
	r := ratio(float64(e2b), float64(own))
	rows := []row{
		{label: fmt.Sprintf("Sandbox.create() + commands.run('echo hi'), %s, a warm pool of %d (a daemon of its own, --runtime %s)", rt, poolSize, rt)},
		durationRow("  through Hutch's E2B front (e2b SDK)", viaE2B.samples),
		{label: "    against the target", median: fmtDuration(e2b), target: target(e2b <= e2bPoolTarget, fmtTarget(e2bPoolTarget))},
		durationRow("    of which Sandbox.create()", viaE2B.creates[warmup:]),
		durationRow("  through Hutch's own API (Go client; the same login bash)", viaHutch.samples),
		durationRow("    of which CreateSandbox", viaHutch.creates[warmup:]),
		{label: "    ratio e2b SDK / Hutch API", median: fmtRatio(r), p90: fmtRatio(ratio(float64(p90(viaE2B.samples)), float64(p90(viaHutch.samples))))},
	}
	res := result{ID: "k/pool-" + rt, Topic: topicE2B,
		What: fmt.Sprintf("the unmodified e2b 2.51 SDK's `Sandbox.create()` + `commands.run('echo hi')` through the E2B front, %s, "+
			"a warm pool of %d (a daemon whose default runtime it is)", runtimeName(rt), poolSize),
		Hutch: durationFig("", e2b),
		Peers: []figure{durationFig("the same through Hutch's own API (Go client; the same login bash)", own)},
		Ratio: []term{ratioTerm(r, "Hutch's API"), targetTerm(e2b <= e2bPoolTarget, fmtTarget(e2bPoolTarget))},
	}
	if e2b > e2bPoolTarget && own > e2bPoolTarget {
		res.Ratio[1].Target.Note = "beyond this host's floor: the same login bash through Hutch's API alone takes " + fmtDuration(own)
	}
	res.Hutch.Text += " (of which `Sandbox.create()` " + fmtDuration(median(viaE2B.creates[warmup:])) + ")"
	return rows, res
}

// minuteLines are the rows and the result of the agent's first minute
// under rt: the e2b SDK's path (sdk, and its parts: create, the loop,
// node -v) against its floor (and its parts: the loop, node -v). Under
// runc its target is a time; under gVisor, whose every process costs
// more, a ratio to the floor.
func minuteLines(rt string, sdk, floor []time.Duration, parts [3][]time.Duration, floorParts [2][]time.Duration, warmup int) ([]row, result) {
	m, f := median(sdk), median(floor)
	r := ratio(float64(m), float64(f))
	rows := []row{
		{label: fmt.Sprintf("an agent's first minute, %s, the same pool: Sandbox.create(), commands.run(15 × /bin/true), commands.run('node -v')", rt)},
		durationRow("  through Hutch's E2B front (e2b SDK)", sdk),
	}
	ratioRow := row{label: "    ratio e2b SDK / floor", median: fmtRatio(r), p90: fmtRatio(ratio(float64(p90(sdk)), float64(p90(floor))))}
	ratioTerms := []term{ratioTerm(r, "the floor")}
	if rt == "gvisor" {
		want := fmt.Sprintf("≤ %.1f×", minuteGvisorRatio)
		ratioRow.target = target(r <= minuteGvisorRatio, want+" the floor")
		ratioTerms[0] = ratioTerms[0].with(r <= minuteGvisorRatio, want)
	} else {
		want := fmtTarget(minuteRuncTarget)
		rows = append(rows, row{label: "    against the target", median: fmtDuration(m), target: target(m <= minuteRuncTarget, want)})
		ratioTerms = append(ratioTerms, targetTerm(m <= minuteRuncTarget, want))
	}
	rows = append(rows,
		durationRow("    of which Sandbox.create()", parts[0][warmup:]),
		durationRow("    of which commands.run(15 × /bin/true)", parts[1][warmup:]),
		durationRow("    of which commands.run('node -v')", parts[2][warmup:]),
		durationRow("  floor: the two commands through Hutch's API (exec of bash -l -c, as the SDK runs them), the sandbox running", floor),
		durationRow("    of which 15 × /bin/true", floorParts[0][warmup:]),
		durationRow("    of which node -v", floorParts[1][warmup:]),
		ratioRow,
	)
	res := result{ID: "k/minute-" + rt, Topic: topicE2B,
		What: fmt.Sprintf("an agent's first minute as outside benchmarks run it, with a warm pool, %s: `Sandbox.create()`, "+
			"then one `commands.run()` of a shell running 15 `/bin/true`, then `commands.run('node -v')`", runtimeName(rt)),
		Hutch: durationFig("", m),
		Peers: []figure{durationFig("the two commands alone through Hutch's API, in a sandbox already running (the processes' own cost)", f)},
		Ratio: ratioTerms,
	}
	res.Hutch.Text += " (p90 " + fmtDuration(p90(sdk)) + ")"
	return rows, res
}

// waitSettled waits until the daemon's pools of the host template are full
// and no deleted sandbox is being torn down: a round measured then pays for
// none of the rounds before it (their teardowns and refills take the cores
// too).
func waitSettled(ctx context.Context, c *client.Client) error {
	return waitHealth(ctx, c, "full pools and no teardown under way", func(h *client.Health) bool {
		full := !slices.ContainsFunc(h.Pools, func(p client.PoolHealth) bool { return p.Template == "host" && p.Ready < p.Size })
		return full && h.Deleting == 0
	})
}

// poolHits counts the sandboxes the daemon logged as created, and those
// of them handed over from its warm pool.
func (d *daemon) poolHits() (hits, creates int, err error) {
	b, err := os.ReadFile(d.logPath)
	if err != nil {
		return 0, 0, err
	}
	for line := range strings.Lines(string(b)) {
		if !strings.Contains(line, "sandbox created") {
			continue
		}
		creates++
		if strings.Contains(line, "from_pool=true") || strings.Contains(line, `"from_pool":true`) {
			hits++
		}
	}
	return hits, creates, nil
}
