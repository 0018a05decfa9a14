package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hutchdev/hutch/client"
)

// poolSize is the warm pool of each runtime in row (f).
const poolSize = 2

// measurePool is row (f): create → first output of `echo hi` when the warm
// pool has a sandbox ready, with runc and with gVisor, on a daemon of its
// own whose pools keep poolSize sandboxes of the host template. Before each
// timed create the pool is waited for until it is full again (not timed):
// the row measures handing over, not refilling.
func (b *bench) measurePool(ctx context.Context) (_ section, err error) {
	runtimes := []string{"runc"}
	n := b.cfg.createN
	if b.runsc != "" && b.cfg.gvisorN > 0 {
		runtimes, n = append(runtimes, "gvisor"), b.cfg.gvisorN
	}
	var flags []string
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
	posts := map[string][]time.Duration{}
	var peers []*peer
	for _, rt := range append(runtimes, "runc+volume") {
		peers = append(peers, &peer{name: "hutch pool (" + rt + ")", run: func(ctx context.Context) (time.Duration, error) {
			req := client.CreateSandboxRequest{Runtime: rt}
			if rt == "runc+volume" {
				req = claim
			}
			if err := waitPoolFull(ctx, d.client, req.Runtime); err != nil {
				return 0, err
			}
			p, f, err := createWith(ctx, d.client, req)
			posts[rt] = append(posts[rt], p)
			return f, err
		}})
	}
	if err := b.interleave(ctx, "(f) warm pool create", n, peers...); err != nil {
		return section{}, err
	}
	s := section{title: "(f) warm pool: create → first output of `echo hi`, a sandbox ready"}
	plain, claimed := median(peers[0].samples), median(peers[len(peers)-1].samples)
	for i, rt := range runtimes {
		m := median(peers[i].samples)
		s.rows = append(s.rows,
			durationRow("hutch ("+rt+"): create from the pool + exec echo (SSE), to first stdout", peers[i].samples),
			durationRow("  of which POST /v1/sandboxes", posts[rt][b.cfg.warmup:]),
			row{label: "  against the target", median: fmtDuration(m), target: target(m <= 5*time.Millisecond, "≤ 5 ms")},
		)
		res := result{ID: "f/pool-" + rt, Topic: topicRunc, What: "the same from a warm pool",
			Hutch: durationFig("", m),
			Ratio: []term{targetTerm(m <= 5*time.Millisecond, "≤ 5 ms")},
		}
		res.Hutch.Text += " (of which the create " + fmtDuration(median(posts[rt][b.cfg.warmup:])) + ")"
		if rt == "gvisor" {
			res.Topic = topicGvisor
			if m > 5*time.Millisecond {
				res.Ratio[0].Target.Note = "one exec's floor inside gVisor is above it"
			}
		}
		s.results = append(s.results, res)
	}
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

// waitPoolFull waits until the daemon's pool of the host template on
// runtime is full.
func waitPoolFull(ctx context.Context, c *client.Client, runtime string) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		h, err := c.Health(ctx)
		if err != nil {
			return err
		}
		for _, p := range h.Pools {
			if p.Template == "host" && p.Runtime == runtime && p.Ready >= p.Size {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the %s pool did not fill within a minute: %w", runtime, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}
