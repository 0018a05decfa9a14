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
// publish for E2B's cloud (0.4–0.5 s median). The SDK is test/e2b's (npm
// ci there; make test does it).

// e2bPublished is the median independent benchmarks report for E2B's
// create and first command, from their middle: 0.4–0.5 s.
const e2bPublished = 450 * time.Millisecond

// e2bScript times one create and echo per line it reads, and prints each
// time in ms; the sandbox is killed after the timing.
const e2bScript = `import { Sandbox } from 'e2b'
import readline from 'node:readline'
for await (const _ of readline.createInterface({ input: process.stdin })) {
  const t = performance.now()
  const sbx = await Sandbox.create()
  const r = await sbx.commands.run('echo hi')
  const ms = performance.now() - t
  await sbx.kill()
  if (r.stdout !== 'hi\n') throw new Error('echo hi said ' + JSON.stringify(r.stdout))
  console.log(ms)
}`

// measureE2B is row (k).
func (b *bench) measureE2B(ctx context.Context) (_ section, err error) {
	sdk, err := filepath.Abs(b.cfg.e2bSDK)
	if err != nil {
		return section{}, err
	}
	if _, err := os.Stat(filepath.Join(sdk, "node_modules", "e2b")); err != nil {
		return section{}, fmt.Errorf("the e2b SDK is not installed in %s (make test installs it, or npm ci there): %w", sdk, err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return section{}, fmt.Errorf("row (k) needs node: %w", err)
	}
	info, err := b.d.client.E2BInfo(ctx)
	if err != nil {
		return section{}, err
	}
	script := filepath.Join(sdk, ".bench-e2b.mjs") // beside node_modules, which it imports
	if err := os.WriteFile(script, []byte(e2bScript), 0o600); err != nil {
		return section{}, err
	}
	defer func() { _ = os.Remove(script) }()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Env = append(os.Environ(), "E2B_API_KEY=e2b_"+strings.TrimPrefix(b.d.key, "hutch_"), "E2B_API_URL="+info.APIURL,
		"E2B_SANDBOX_URL="+info.SandboxURL, "E2B_DOMAIN="+info.Domain)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return section{}, err
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		return section{}, err
	}
	if err := cmd.Start(); err != nil {
		return section{}, err
	}
	defer func() {
		_ = in.Close()
		if werr := cmd.Wait(); werr != nil && err == nil {
			err = fmt.Errorf("the e2b script: %w: %s", werr, stderr.String())
		}
	}()
	out := bufio.NewScanner(outPipe)
	viaE2B := &peer{name: "e2b SDK", run: func(context.Context) (time.Duration, error) {
		if _, err := io.WriteString(in, "\n"); err != nil {
			return 0, err
		}
		if !out.Scan() {
			return 0, errors.Join(errors.New("the e2b script stopped: "+stderr.String()), out.Err())
		}
		ms, err := strconv.ParseFloat(strings.TrimSpace(out.Text()), 64)
		return time.Duration(ms * float64(time.Millisecond)), err
	}}
	viaHutch := &peer{name: "Hutch API", run: func(ctx context.Context) (time.Duration, error) {
		start := time.Now()
		sb, err := b.d.client.CreateSandbox(ctx, client.CreateSandboxRequest{})
		if err != nil {
			return 0, err
		}
		res, err := b.d.client.Exec(ctx, sb.ID, client.ExecRequest{Command: "echo hi"})
		took := time.Since(start)
		if derr := b.deleteSandbox(ctx, sb.ID); err == nil {
			err = derr
		}
		if err == nil && res.Stdout != "hi\n" {
			err = fmt.Errorf("echo hi said %q", res.Stdout)
		}
		return took, err
	}}
	if err := b.interleave(ctx, "(k) create and echo hi through the e2b SDK and Hutch's API", b.cfg.createN, viaE2B, viaHutch); err != nil {
		return section{}, err
	}
	h, err := b.d.client.Health(ctx)
	if err != nil {
		return section{}, err
	}
	e2b, own := median(viaE2B.samples), median(viaHutch.samples)
	return section{title: "(k) E2B compatibility: Sandbox.create() + commands.run('echo hi'), unmodified e2b 2.51 SDK, default runtime (" + h.DefaultRuntime + "), no warm pool", rows: []row{
		durationRow("through Hutch's E2B front (e2b SDK, Node.js)", viaE2B.samples),
		durationRow("through Hutch's own API (Go client)", viaHutch.samples),
		{label: "  ratio e2b SDK / Hutch API", median: fmtRatio(ratio(float64(e2b), float64(own)))},
		{label: "  E2B's cloud, as independent benchmarks publish it (0.4–0.5 s)", median: fmtDuration(e2bPublished)},
		{label: "  ratio Hutch (e2b SDK) / E2B's cloud", median: fmtRatio(ratio(float64(e2b), float64(e2bPublished)))},
	}, results: []result{{ID: "k/create", Topic: topicE2B,
		What:  "the unmodified e2b 2.51 SDK's `Sandbox.create()` + `commands.run('echo hi')` through the E2B front, " + runtimeName(h.DefaultRuntime) + ", no warm pool",
		Hutch: durationFig("", e2b),
		Peers: []figure{
			durationFig("the same through Hutch's own API (Go client)", own),
			{Name: "E2B's cloud as independent benchmarks publish it", Text: "0.4–0.5 s"},
		},
		Ratio: []term{
			ratioTerm(ratio(float64(e2b), float64(own)), "Hutch's API"),
			ratioTerm(ratio(float64(e2b), float64(e2bPublished)), fmt.Sprintf("E2B's cloud (%.2f s)", e2bPublished.Seconds())),
		},
	}}}, nil
}
