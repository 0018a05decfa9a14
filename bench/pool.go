package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/hutchdev/hutch/client"
)

// poolSize is the warm pool of each runtime in row (f).
const poolSize = 2

// poolTemplate is the template row (f) makes by snapshots, whose pool is
// timed filling after each: a pool whose template was just built. The
// daemon knows it by its name in the workspace (poolTemplateKey).
const (
	poolTemplate    = "benchsnap"
	poolTemplateKey = poolTemplate + "~default"
)

// Row (f)'s targets: a claim to first output under runc, and under gVisor
// beyond the exec floor; a pool full after its template's build.
const (
	poolRuncTarget   = 2 * time.Millisecond
	poolGvisorMargin = 2 * time.Millisecond
	poolFillTarget   = time.Second
)

// measurePool is row (f): create → first output of `echo hi` when the warm
// pool has a sandbox ready, with runc and with gVisor, on a daemon of its
// own whose pools keep poolSize sandboxes of the host template, beside the
// exec floor: the same exec in a sandbox already running. Before each
// timed round the pool is waited for until it is full again (not timed):
// the row measures handing over, not refilling. Then how soon a pool is
// full after its template is built (a snapshot of a sandbox, here).
func (b *bench) measurePool(ctx context.Context) (_ section, err error) {
	runtimes := []string{"runc"}
	n := b.cfg.createN
	if b.runsc != "" && b.cfg.gvisorN > 0 {
		runtimes, n = append(runtimes, "gvisor"), b.cfg.gvisorN
	}
	flags := []string{"--pool", poolTemplateKey + "@runc=1"}
	for _, rt := range runtimes {
		flags = append(flags, "--pool", fmt.Sprintf("host@%s=%d", rt, poolSize))
	}
	dir := filepath.Join(b.dir, "pool")
	// #nosec G301 -- runc reaches sandbox roots through it from their user namespaces
	if err := os.Mkdir(dir, 0o711); err != nil {
		return section{}, err
	}
	d, err := startDaemon(ctx, b.cfg.hutch, b.runsc, dir, flags...)
	if d != nil {
		defer func() { err = errors.Join(err, d.stop()) }()
		defer func() { err = errors.Join(err, cleanup(ctx, d.deleteAll)) }()
	}
	if err != nil {
		return section{}, err
	}
	// A claim that asks for env, a secret and a volume (runc mounts it
	// into the pool's sandbox; gVisor cannot, and makes one anew).
	if _, err := d.client.CreateVolume(ctx, "bench"); err != nil {
		return section{}, err
	}
	if _, err := d.client.SetSecret(ctx, client.SetSecretRequest{Name: "BENCH_TOKEN", Value: "bench"}); err != nil {
		return section{}, err
	}
	claim := client.CreateSandboxRequest{Runtime: "runc", Env: map[string]string{"STAGE": "bench"}, Secrets: []string{"BENCH_TOKEN"},
		Volumes: []client.VolumeMount{{Name: "bench", Path: "/home/user/data"}}}
	// The floors' sandboxes, running throughout. Every round starts once
	// the pools are full again and the last round's sandbox is gone.
	running := map[string]string{}
	defer func() {
		for _, id := range running {
			err = errors.Join(err, deleteSandbox(ctx, d.client, id))
		}
	}()
	for _, rt := range runtimes {
		sb, err := d.client.CreateSandbox(ctx, client.CreateSandboxRequest{Runtime: rt})
		if err != nil {
			return section{}, err
		}
		running[rt] = sb.ID
	}
	posts := map[string][]time.Duration{}
	var peers, floors []*peer
	for _, rt := range append(runtimes, "runc+volume") {
		peers = append(peers, &peer{name: "hutch pool (" + rt + ")", run: func(ctx context.Context) (time.Duration, error) {
			req := client.CreateSandboxRequest{Runtime: rt}
			if rt == "runc+volume" {
				req = claim
			}
			if err := waitSettled(ctx, d.client); err != nil {
				return 0, err
			}
			p, f, err := createWith(ctx, d.client, req)
			posts[rt] = append(posts[rt], p)
			return f, err
		}})
	}
	for _, rt := range runtimes {
		floors = append(floors, &peer{name: "exec floor (" + rt + ")", run: func(ctx context.Context) (time.Duration, error) {
			if err := waitSettled(ctx, d.client); err != nil {
				return 0, err
			}
			return execFirst(ctx, d.client, running[rt], time.Now())
		}})
	}
	if err := b.interleave(ctx, "(f) warm pool create", n, append(slices.Clone(peers), floors...)...); err != nil {
		return section{}, err
	}
	fills, err := b.poolFills(ctx, d)
	if err != nil {
		return section{}, err
	}
	s := section{title: "(f) warm pool: create → first output of `echo hi`, a sandbox ready"}
	plain, claimed := median(peers[0].samples), median(peers[len(peers)-1].samples)
	for i, rt := range runtimes {
		m, floor := median(peers[i].samples), median(floors[i].samples)
		limit, want := poolRuncTarget, "≤ 2 ms"
		if rt == "gvisor" {
			limit, want = floor+poolGvisorMargin, "≤ the exec floor + 2 ms"
		}
		s.rows = append(s.rows,
			durationRow("hutch ("+rt+"): create from the pool + exec echo (SSE), to first stdout", peers[i].samples),
			durationRow("  of which POST /v1/sandboxes", posts[rt][b.cfg.warmup:]),
			durationRow("  exec floor: the same exec in a sandbox already running", floors[i].samples),
			row{label: "  against the target", median: fmtDuration(m), target: target(m <= limit, want)},
		)
		res := result{ID: "f/pool-" + rt, Topic: topicRunc, What: "the same from a warm pool",
			Hutch: durationFig("", m),
			Peers: []figure{durationFig("the same exec in a sandbox already running", floor)},
			Ratio: []term{{Text: "+" + fmtDuration(m-floor) + " over the exec"}, targetTerm(m <= limit, want)},
		}
		if rt == "runc" && m > limit && floor > limit {
			res.Ratio[1].Target.Note = "beyond this host's floor: the same exec alone takes " + fmtDuration(floor)
		}
		res.Hutch.Text += " (of which the create " + fmtDuration(median(posts[rt][b.cfg.warmup:])) + ")"
		if rt == "gvisor" {
			res.Topic = topicGvisor
		}
		s.results = append(s.results, res)
	}
	fill := median(fills)
	s.rows = append(s.rows,
		durationRow("a pool full after its template is built (a snapshot of a sandbox, runc)", fills),
		row{label: "  against the target", median: fmtDuration(fill), target: target(fill <= poolFillTarget, "≤ 1 s")})
	s.results = append(s.results, result{ID: "f/pool-fill", Topic: topicRunc,
		What:  "a warm pool of a template just built (a snapshot of a sandbox): full, from the build's answer",
		Hutch: durationFig("", fill), Ratio: []term{targetTerm(fill <= poolFillTarget, "≤ 1 s")}})
	claimRatio := ratio(claimed, plain)
	s.rows = append(s.rows,
		durationRow("hutch (runc): the same, the create asking for env, a secret and a volume", peers[len(peers)-1].samples),
		row{label: "  ratio to a plain claim", median: fmtRatio(claimRatio), target: target(claimRatio <= 1.2, "≤ 1.2×")})
	s.results = append(s.results, result{ID: "f/pool-runc-volume", Topic: topicRunc,
		What:  "the same from a warm pool, the create asking for env, a secret and a volume (mounted into the pool's sandbox)",
		Hutch: durationFig("", claimed), Peers: []figure{durationFig("a plain claim", plain)},
		Ratio: []term{ratioTerm(claimRatio, "a plain claim").with(claimRatio <= 1.2, "≤ 1.2×")}})
	return s, nil
}

// waitPoolFull waits until the daemon's pool of template on runtime is
// full.
func waitPoolFull(ctx context.Context, c *client.Client, template, runtime string) error {
	return waitHealth(ctx, c, fmt.Sprintf("the %s pool of %s to fill", runtime, template), func(h *client.Health) bool {
		return poolFull(h, template, runtime)
	})
}

// poolFull reports whether h says the pool of template on runtime is full.
func poolFull(h *client.Health, template, runtime string) bool {
	return slices.ContainsFunc(h.Pools, func(p client.PoolHealth) bool {
		return p.Template == template && p.Runtime == runtime && p.Ready >= p.Size
	})
}

// waitHealth asks the daemon's health every 5 ms until ok says so, for a
// minute at most; what says what is waited for.
func waitHealth(ctx context.Context, c *client.Client, what string, ok func(*client.Health) bool) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		h, err := c.Health(ctx)
		if err != nil {
			return err
		}
		if ok(h) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waited a minute for %s: %w", what, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// execFirst runs echo hi (SSE) in sandbox id and returns the time from
// start to its first stdout.
func execFirst(ctx context.Context, c *client.Client, id string, start time.Time) (first time.Duration, err error) {
	exit, err := c.ExecStream(ctx, id, client.ExecRequest{Cmd: echoArgs}, func(ev client.ExecEvent) error {
		if first == 0 && ev.Stream == client.Stdout {
			first = time.Since(start)
		}
		return nil
	})
	switch {
	case err != nil:
		return first, fmt.Errorf("exec in sandbox %s: %w", id, err)
	case exit.ExitCode != 0 || first == 0:
		return first, fmt.Errorf("echo in sandbox %s: exit code %d, no output", id, exit.ExitCode)
	}
	return first, nil
}

// poolFills times, a few times, how soon the pool of poolTemplate is full
// after a snapshot of a sandbox makes a new version of it (the pool's
// sandboxes of the version before go, new ones come).
func (b *bench) poolFills(ctx context.Context, d *daemon) (_ []time.Duration, err error) {
	sb, err := d.client.CreateSandbox(ctx, client.CreateSandboxRequest{Runtime: "runc"})
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, deleteSandbox(ctx, d.client, sb.ID)) }()
	var fills []time.Duration
	for i := range 5 {
		b.showProgress("(f) a pool after its template's build: %d/5", i+1)
		if _, err := d.client.SnapshotSandbox(ctx, sb.ID, poolTemplate); err != nil {
			return nil, fmt.Errorf("snapshot as %s: %w", poolTemplate, err)
		}
		built := time.Now()
		if err := waitPoolFull(ctx, d.client, poolTemplateKey, "runc"); err != nil {
			return nil, err
		}
		fills = append(fills, time.Since(built))
	}
	b.endProgress()
	return fills, nil
}
