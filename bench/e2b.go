package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hutchdev/hutch/client"
)

// Row (k): what an E2B user's script sees: the unmodified e2b SDK's
// Sandbox.create() and commands.run('echo hi') through Hutch's E2B front,
// against the same through Hutch's own API (the Go client), on the same
// daemon, interleaved; and against the figure independent benchmarks
// publish for E2B's cloud (0.4–0.5 s median). Then the same with a warm
// pool, and an agent's first minute (e2bpool.go). The SDK is test/e2b's
// (npm ci there; make test does it).

// e2bPublished is the median independent benchmarks report for E2B's
// create and first command, from their middle: 0.4–0.5 s.
const e2bPublished = 450 * time.Millisecond

// e2bRatioTarget is the most the e2b SDK's create and first command may
// take, as a ratio to the same through Hutch's API (the same commands).
const e2bRatioTarget = 1.05

// e2bEchoScript times one create and echo per line it reads, and prints
// the time in ms, then the create's; the sandbox is killed after the
// timing.
const e2bEchoScript = `import { Sandbox } from 'e2b'
import readline from 'node:readline'
for await (const _ of readline.createInterface({ input: process.stdin })) {
  const t = performance.now()
  const sbx = await Sandbox.create()
  const created = performance.now()
  const r = await sbx.commands.run('echo hi')
  const ms = performance.now() - t
  await sbx.kill()
  if (r.stdout !== 'hi\n') throw new Error('echo hi said ' + JSON.stringify(r.stdout))
  console.log(ms, created - t)
}`

// measureE2B is row (k): without a warm pool on the bench's daemon, then
// with one on a daemon of its own for each runtime.
func (b *bench) measureE2B(ctx context.Context) (section, error) {
	sdk, err := b.e2bSDK()
	if err != nil {
		return section{}, err
	}
	s := section{title: "(k) E2B compatibility: the unmodified e2b 2.51 SDK (Node.js) through Hutch's E2B front, beside Hutch's own API (Go client)"}
	if err := b.measureE2BCold(ctx, sdk, &s); err != nil {
		return section{}, err
	}
	runtimes := []string{"runc"}
	if b.runsc != "" && b.cfg.gvisorN > 0 {
		runtimes = append(runtimes, "gvisor")
	}
	// Rows by runtime, a daemon's after the other; results by what they
	// measure, the runtimes side by side.
	var echoes, minutes []result
	for _, rt := range runtimes {
		run, err := b.measureE2BPool(ctx, sdk, rt)
		if err != nil {
			return section{}, fmt.Errorf("(k) with a warm pool, %s: %w", rt, err)
		}
		s.rows = append(s.rows, run.rows...)
		echoes, minutes = append(echoes, run.echo), append(minutes, run.minute)
	}
	s.results = append(append(s.results, echoes...), minutes...)
	return s, nil
}

// measureE2BCold is row (k) without a warm pool, on the bench's daemon
// and its default runtime.
func (b *bench) measureE2BCold(ctx context.Context, sdk e2bSDK, s *section) (err error) {
	script, err := sdk.start(ctx, b.d, "e2b-echo", e2bEchoScript)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, script.close()) }()
	viaE2B, viaHutch := echoPeers(b.d.client, script, nil)
	if err := b.interleave(ctx, "(k) create and echo hi through the e2b SDK and Hutch's API", b.cfg.createN, viaE2B.peer, viaHutch.peer); err != nil {
		return err
	}
	h, err := b.d.client.Health(ctx)
	if err != nil {
		return err
	}
	e2b, own := median(viaE2B.samples), median(viaHutch.samples)
	r, cloud := ratio(float64(e2b), float64(own)), ratio(float64(e2b), float64(e2bPublished))
	met, want := r <= e2bRatioTarget, fmt.Sprintf("≤ %.2f×", e2bRatioTarget)
	s.rows = append(s.rows,
		row{label: "Sandbox.create() + commands.run('echo hi'), default runtime (" + h.DefaultRuntime + "), no warm pool"},
		durationRow("  through Hutch's E2B front (e2b SDK)", viaE2B.samples),
		durationRow("    of which Sandbox.create()", viaE2B.creates[b.cfg.warmup:]),
		durationRow("  through Hutch's own API (Go client; the same login bash)", viaHutch.samples),
		durationRow("    of which CreateSandbox", viaHutch.creates[b.cfg.warmup:]),
		row{label: "    ratio e2b SDK / Hutch API", median: fmtRatio(r), target: target(met, want+" Hutch API")},
		row{label: "  E2B's cloud, as independent benchmarks publish it (0.4–0.5 s)", median: fmtDuration(e2bPublished)},
		row{label: "    ratio Hutch (e2b SDK) / E2B's cloud", median: fmtRatio(cloud)},
	)
	s.results = append(s.results, result{ID: "k/create", Topic: topicE2B,
		What:  "the unmodified e2b 2.51 SDK's `Sandbox.create()` + `commands.run('echo hi')` through the E2B front, " + runtimeName(h.DefaultRuntime) + ", no warm pool",
		Hutch: durationFig("", e2b),
		Peers: []figure{
			durationFig("the same through Hutch's own API (Go client; the same login bash)", own),
			{Name: "E2B's cloud as independent benchmarks publish it", Text: "0.4–0.5 s"},
		},
		Ratio: []term{
			ratioTerm(r, "Hutch's API").with(met, want),
			ratioTerm(cloud, fmt.Sprintf("E2B's cloud (%.2f s)", e2bPublished.Seconds())),
		},
	})
	return nil
}

// createPeer is a peer of create + echo hi, with the create's share of
// each round, warm-up rounds included.
type createPeer struct {
	*peer
	creates []time.Duration
}

// echoPeers are create + echo hi through the e2b SDK's script and through
// Hutch's API (c). Each round first waits for settle, untimed, when it is
// not nil.
func echoPeers(c *client.Client, script *sdkScript, settle func(context.Context) error) (viaE2B, viaHutch *createPeer) {
	viaE2B = &createPeer{}
	viaE2B.peer = &peer{name: "e2b SDK", run: func(ctx context.Context) (time.Duration, error) {
		if settle != nil {
			if err := settle(ctx); err != nil {
				return 0, err
			}
		}
		ts, err := script.round(2)
		if err != nil {
			return 0, err
		}
		viaE2B.creates = append(viaE2B.creates, ts[1])
		return ts[0], nil
	}}
	viaHutch = &createPeer{}
	viaHutch.peer = &peer{name: "Hutch API", run: func(ctx context.Context) (time.Duration, error) {
		if settle != nil {
			if err := settle(ctx); err != nil {
				return 0, err
			}
		}
		start := time.Now()
		sb, err := c.CreateSandbox(ctx, client.CreateSandboxRequest{})
		if err != nil {
			return 0, err
		}
		viaHutch.creates = append(viaHutch.creates, time.Since(start))
		// The same processes as the SDK's: a login bash.
		res, err := c.Exec(ctx, sb.ID, client.ExecRequest{Cmd: sdkShell("echo hi")})
		took := time.Since(start)
		if derr := deleteSandbox(ctx, c, sb.ID); err == nil {
			err = derr
		}
		if err == nil && res.Stdout != "hi\n" {
			err = fmt.Errorf("echo hi said %q", res.Stdout)
		}
		return took, err
	}}
	return viaE2B, viaHutch
}

// e2bSDK is where row (k) finds the e2b SDK, and node to run it.
type e2bSDK struct {
	dir  string // holds node_modules/e2b
	node string
}

// e2bSDK finds the SDK (-e2b-sdk) and node.
func (b *bench) e2bSDK() (e2bSDK, error) {
	dir, err := filepath.Abs(b.cfg.e2bSDK)
	if err != nil {
		return e2bSDK{}, err
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "e2b")); err != nil {
		return e2bSDK{}, fmt.Errorf("the e2b SDK is not installed in %s (make test installs it, or npm ci there): %w", dir, err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return e2bSDK{}, fmt.Errorf("row (k) needs node: %w", err)
	}
	return e2bSDK{dir: dir, node: node}, nil
}

// sdkScript is a Node.js script of the e2b SDK, running as an E2B user's
// script would against one daemon: each line it reads runs one round, and
// it answers with a line of times in ms.
type sdkScript struct {
	cmd    *exec.Cmd
	file   string
	in     io.WriteCloser
	out    *bufio.Scanner
	stderr strings.Builder
	waited bool
}

// start writes script, named name, beside the SDK's node_modules, which
// it imports, and runs it with the environment `hutch e2b env` gives for
// d, with d's own key. close ends it.
func (sdk e2bSDK) start(ctx context.Context, d *daemon, name, script string) (_ *sdkScript, err error) {
	info, err := d.client.E2BInfo(ctx)
	if err != nil {
		return nil, err
	}
	s := &sdkScript{file: filepath.Join(sdk.dir, ".bench-"+name+".mjs")}
	if err := os.WriteFile(s.file, []byte(script), 0o600); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(s.file)
		}
	}()
	s.cmd = exec.CommandContext(ctx, sdk.node, s.file)
	s.cmd.Env = append(os.Environ(), "E2B_API_KEY=e2b_"+strings.TrimPrefix(d.key, "hutch_"), "E2B_API_URL="+info.APIURL,
		"E2B_SANDBOX_URL="+info.SandboxURL, "E2B_DOMAIN="+info.Domain)
	s.cmd.Stderr = &s.stderr
	if s.in, err = s.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	s.out = bufio.NewScanner(out)
	return s, nil
}

// round runs one round and returns the n times the script printed for it.
func (s *sdkScript) round(n int) ([]time.Duration, error) {
	if _, err := io.WriteString(s.in, "\n"); err != nil {
		return nil, err
	}
	if !s.out.Scan() {
		_ = s.in.Close()
		return nil, errors.Join(errors.New("the e2b script stopped"), s.out.Err(), s.wait())
	}
	fields := strings.Fields(s.out.Text())
	if len(fields) != n {
		return nil, fmt.Errorf("the e2b script said %q, not %d times", s.out.Text(), n)
	}
	ts := make([]time.Duration, n)
	for i, f := range fields {
		ms, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return nil, fmt.Errorf("the e2b script said %q: %w", s.out.Text(), err)
		}
		ts[i] = time.Duration(ms * float64(time.Millisecond))
	}
	return ts, nil
}

// wait waits for the script to end, and returns its error with what it
// wrote on stderr, once.
func (s *sdkScript) wait() error {
	if s.waited {
		return nil
	}
	s.waited = true
	if err := s.cmd.Wait(); err != nil {
		return fmt.Errorf("the e2b script: %w: %s", err, s.stderr.String())
	}
	return nil
}

// close ends the script (its input ends its loop) and removes its file.
func (s *sdkScript) close() error {
	_ = s.in.Close()
	return errors.Join(s.wait(), os.Remove(s.file))
}
