package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/storage/store/pgtest"
)

// Row (l), scale-out: what an API replica adds to a call, and how creates
// scale with nodes. The nodes run on this one machine (on the loopback,
// in the directories of the bench), so the throughput row measures the
// routing and placement, bounded by this machine's cores, not hosts'.

// clusterClients are the concurrent clients of the throughput row.
const clusterClients = 6

// benchCluster is the daemons of row (l) and the database they share.
type benchCluster struct {
	nodes   []*daemon
	replica *daemon
	stopDB  func() error
}

// startCluster starts nodes node daemons and an API replica on a fresh
// PostgreSQL, under dir.
func (b *bench) startCluster(ctx context.Context, dir string, nodes int) (_ *benchCluster, err error) {
	url, stopDB, err := pgtest.Serve(ctx)
	if err != nil {
		return nil, fmt.Errorf("start PostgreSQL (Debian's postgresql package): %w", err)
	}
	c := &benchCluster{stopDB: stopDB}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.stop(ctx))
		}
	}()
	// #nosec G301 -- runc reaches sandbox roots through it from their user namespaces
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return nil, err
	}
	keyFile, masterFile := filepath.Join(dir, "api.key"), filepath.Join(dir, "secrets.key")
	key, master := make([]byte, 24), make([]byte, 32)
	_, _ = rand.Read(key)
	_, _ = rand.Read(master)
	if err := errors.Join(
		os.WriteFile(keyFile, []byte("hutch_"+hex.EncodeToString(key)+"\n"), 0o600),
		os.WriteFile(masterFile, []byte(base64.StdEncoding.EncodeToString(master)+"\n"), 0o600),
	); err != nil {
		return nil, err
	}
	shared := []string{"--store", url, "--api-key-file", keyFile, "--heartbeat", "1s"}
	for i := range nodes {
		base := filepath.Join(dir, fmt.Sprintf("n%d", i))
		// #nosec G301 -- as above
		if err := os.Mkdir(base, 0o711); err != nil {
			return c, err
		}
		d, err := startDaemon(ctx, b.cfg.hutch, b.runsc, base, append([]string{"--role", "node", "--node-name", fmt.Sprintf("node-%d", i+1),
			"--secrets-key-file", masterFile, "--pool", "base=0", "--runtime", "runc"}, shared...)...)
		if d != nil {
			c.nodes = append(c.nodes, d)
		}
		if err != nil {
			return c, err
		}
	}
	base := filepath.Join(dir, "api")
	if err := os.Mkdir(base, 0o700); err != nil {
		return c, err
	}
	c.replica, err = startDaemon(ctx, b.cfg.hutch, "", base, append([]string{"--role", "api"}, shared...)...)
	return c, err
}

// stop deletes the sandboxes and stops every daemon, then the database.
func (c *benchCluster) stop(ctx context.Context) error {
	var errs []error
	if c.replica != nil {
		errs = append(errs, cleanup(ctx, c.replica.deleteAll), c.replica.stop())
	}
	for _, d := range c.nodes {
		errs = append(errs, d.stop())
	}
	return errors.Join(append(errs, c.stopDB())...)
}

// measureCluster is row (l).
func (b *bench) measureCluster(ctx context.Context) (_ section, err error) {
	one, err := b.startCluster(ctx, filepath.Join(b.dir, "cluster1"), 1)
	if one != nil {
		defer func() { err = errors.Join(err, one.stop(ctx)) }()
	}
	if err != nil {
		return section{}, err
	}
	// What the replica adds: the same node, called directly and through it.
	node, replica := one.nodes[0].client, one.replica.client
	direct := &peer{name: "create on the node", run: func(ctx context.Context) (time.Duration, error) {
		_, first, err := hutchCreate(ctx, node, "runc")
		return first, err
	}}
	routed := &peer{name: "create through the replica", run: func(ctx context.Context) (time.Duration, error) {
		_, first, err := hutchCreate(ctx, replica, "runc")
		return first, err
	}}
	if err := b.interleave(ctx, "(l) create through a replica", b.cfg.createN, direct, routed); err != nil {
		return section{}, err
	}
	sb, err := node.CreateSandbox(ctx, client.CreateSandboxRequest{Runtime: "runc"})
	if err != nil {
		return section{}, err
	}
	defer func() { err = errors.Join(err, deleteSandbox(ctx, node, sb.ID)) }()
	execDirect := &peer{name: "exec on the node", run: func(ctx context.Context) (time.Duration, error) { return timeExec(ctx, node, sb.ID) }}
	execRouted := &peer{name: "exec through the replica", run: func(ctx context.Context) (time.Duration, error) { return timeExec(ctx, replica, sb.ID) }}
	if err := b.interleave(ctx, "(l) exec through a replica", b.cfg.n, execDirect, execRouted); err != nil {
		return section{}, err
	}
	added := median(routed.samples) - median(direct.samples)
	execAdded := median(execRouted.samples) - median(execDirect.samples)

	// Throughput: creates a second through the replica, one node and three.
	oneRate, err := createRate(ctx, replica, b.cfg.createN)
	if err != nil {
		return section{}, err
	}
	three, err := b.startCluster(ctx, filepath.Join(b.dir, "cluster3"), 3)
	if three != nil {
		defer func() { err = errors.Join(err, three.stop(ctx)) }()
	}
	if err != nil {
		return section{}, err
	}
	threeRate, err := createRate(ctx, three.replica.client, b.cfg.createN)
	if err != nil {
		return section{}, err
	}
	return section{title: "(l) scale-out: an API replica in front of node daemons (one machine, PostgreSQL)", rows: []row{
		durationRow("create → first output, on the node directly (runc)", direct.samples),
		durationRow("create → first output, through an API replica", routed.samples),
		{label: "  added by the replica (median)", median: fmtDuration(added), target: target(added <= 2*time.Millisecond, "≤ 2 ms")},
		durationRow("exec round trip of `true`, on the node directly", execDirect.samples),
		durationRow("exec round trip of `true`, through an API replica", execRouted.samples),
		{label: "  added by the replica (median)", median: fmtDuration(execAdded), target: target(execAdded <= 2*time.Millisecond, "≤ 2 ms")},
		{label: fmt.Sprintf("creates + deletes a second, %d clients, 1 node", clusterClients), median: fmt.Sprintf("%.1f/s", oneRate)},
		{label: fmt.Sprintf("creates + deletes a second, %d clients, 3 nodes", clusterClients), median: fmt.Sprintf("%.1f/s", threeRate)},
		{label: "ratio 3 nodes / 1 node (the same cores: not more hosts)", median: fmtRatio(threeRate / oneRate)},
	}, results: []result{
		{ID: "l/create", Topic: topicCluster,
			What:  "create → first output of `echo hi` (runc) through an API replica, one node and PostgreSQL on the same machine",
			Hutch: durationFig("", median(routed.samples)), Peers: []figure{durationFig("on the node directly", median(direct.samples))},
			Ratio: []term{deltaTerm(added, "").with(added <= 2*time.Millisecond, "≤ 2 ms")}},
		{ID: "l/exec", Topic: topicCluster, What: "exec round trip of `true` through an API replica",
			Hutch: durationFig("", median(execRouted.samples)), Peers: []figure{durationFig("on the node directly", median(execDirect.samples))},
			Ratio: []term{deltaTerm(execAdded, "").with(execAdded <= 2*time.Millisecond, "≤ 2 ms")}},
		{ID: "l/rate", Topic: topicCluster,
			What: fmt.Sprintf("create + delete lifecycles a second, %d clients through one replica "+
				"(the nodes share the machine's %d cores: this measures routing and placement, not more hosts)", clusterClients, runtime.NumCPU()),
			Hutch: figure{Text: fmt.Sprintf("3 nodes: %.1f/s", threeRate), Median: ptr(rounded(threeRate, 2)), Unit: "/s"},
			Peers: []figure{{Name: "1 node", Text: fmt.Sprintf("%.1f/s", oneRate), Median: ptr(rounded(oneRate, 2)), Unit: "/s"}},
			Ratio: []term{ratioTerm(threeRate/oneRate, "")}},
	}}, nil
}

// timeExec times one exec of true through c.
func timeExec(ctx context.Context, c *client.Client, id string) (time.Duration, error) {
	start := time.Now()
	res, err := c.Exec(ctx, id, client.ExecRequest{Cmd: []string{trueBin}})
	d := time.Since(start)
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("true in sandbox %s: exit code %d", id, res.ExitCode)
	}
	return d, err
}

// createRate is how many create-and-delete lifecycles a second
// clusterClients clients make through c, n in all.
func createRate(ctx context.Context, c *client.Client, n int) (float64, error) {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		left = n
	)
	start := time.Now()
	for range clusterClients {
		wg.Go(func() {
			for {
				mu.Lock()
				if left == 0 || len(errs) > 0 {
					mu.Unlock()
					return
				}
				left--
				mu.Unlock()
				sb, err := c.CreateSandbox(ctx, client.CreateSandboxRequest{Runtime: "runc"})
				if err == nil {
					err = deleteSandbox(ctx, c, sb.ID)
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	return float64(n) / time.Since(start).Seconds(), nil
}
