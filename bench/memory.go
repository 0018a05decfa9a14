package main

import (
	"cmp"
	"context"
	"encoding/json"
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

// settle is how long idle sandboxes are left alone before their memory is
// read, so that start-up allocations that are freed again do not count.
const settle = 2 * time.Second

// sandboxMemory is what one idle sandbox costs.
type sandboxMemory struct {
	cgroupUsage
	agentPSS int64 // the agent's proportional set size: shared pages split among sharers
	agentUSS int64 // the agent's private pages, what no other process shares
}

// cgroupUsage is a memory cgroup's account.
type cgroupUsage struct {
	usage  int64 // everything charged to the cgroup
	rss    int64 // of which anonymous memory
	cache  int64 // of which page cache (files written in the sandbox, …)
	kernel int64 // of which kernel memory (slab, page tables, stacks)
	procs  int64 // processes in the cgroup
}

// measureMemory is row (c): memory added per idle sandbox, under runc and
// (when runsc is here) gVisor. For each runtime it creates cfg.memN
// sandboxes, waits for them to settle, and reads each one's memory cgroup
// and, under runc, its agent's PSS (the agent is the only process an idle
// sandbox has; with runc no shim stays behind); and, over all of them, the
// daemon's RSS growth. A sandbox's cgroup holds all it costs the host but
// the daemon's part (under gVisor its sandbox and gofer processes too, and
// under both the kernel memory charged to it): the density is how many
// idle sandboxes 8 GiB holds at the cgroup's usage plus the daemon's part.
// The floor beside it is the same container run by the runtime alone with
// sleep for the agent (runtimeAloneMemory).
// (The host's MemAvailable moves by more than a sandbox's cost with the
// page cache of everything else.)
func (b *bench) measureMemory(ctx context.Context) (section, error) {
	runtimes := []string{"runc"}
	if b.runsc != "" {
		runtimes = append(runtimes, "gvisor")
	}
	s := section{title: fmt.Sprintf("(c) memory per idle sandbox (%d sandboxes each, %v after create)", b.cfg.memN, settle)}
	for _, rt := range runtimes {
		rows, results, err := b.measureMemoryOf(ctx, rt)
		if err != nil {
			return section{}, err
		}
		s.rows, s.results = append(s.rows, rows...), append(s.results, results...)
	}
	return s, nil
}

// measureMemoryOf is row (c) for one runtime.
func (b *bench) measureMemoryOf(ctx context.Context, runtime string) (_ []row, _ []result, err error) {
	before, err := b.d.rss()
	if err != nil {
		return nil, nil, fmt.Errorf("daemon RSS: %w", err)
	}
	var ids []string
	defer func() {
		for _, id := range ids {
			err = errors.Join(err, b.deleteSandbox(ctx, id))
		}
	}()
	for i := range b.cfg.memN {
		b.showProgress("(c) memory, %s: creating sandbox %d/%d", runtime, i+1, b.cfg.memN)
		sb, err := b.d.client.CreateSandbox(ctx, client.CreateSandboxRequest{Runtime: runtime})
		if err != nil {
			return nil, nil, fmt.Errorf("create sandbox: %w", err)
		}
		ids = append(ids, sb.ID)
	}
	b.endProgress()
	select {
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	case <-time.After(settle):
	}
	after, err := b.d.rss()
	if err != nil {
		return nil, nil, fmt.Errorf("daemon RSS: %w", err)
	}
	var per []sandboxMemory
	for _, id := range ids {
		m, err := b.sandboxMemory(id, runtime == "runc")
		if err != nil {
			return nil, nil, err
		}
		per = append(per, m)
	}
	n := int64(len(ids))
	floor, err := b.runtimeAloneMemory(ctx, runtime)
	if err != nil {
		return nil, nil, err
	}
	rows, results := memoryRows(runtime, per, (after-before)/n, floor)
	return rows, results, nil
}

// The targets for an idle sandbox's memory cgroup.
const (
	idleRuncTarget   = 3 << 20
	idleGvisorTarget = 12 << 20
)

// aloneN is how many containers the memory floor runs: their cgroups
// differ by little.
const aloneN = 3

// runtimeAloneMemory is row (c)'s floor for runtime: the memory cgroup of
// the bundle Hutch runs, with `sleep infinity` as its process instead of
// the agent, started by the runtime alone (`runc run --detach`, `runsc run
// --detach`) and left to settle as long: what the runtime and the kernel
// cost an idle container, none of it Hutch's. Under gVisor that is the
// Sentry, the gofer and their page cache.
func (b *bench) runtimeAloneMemory(ctx context.Context, runtime string) (_ cgroupUsage, err error) {
	ref, err := b.reference(ctx, runtime)
	if err != nil {
		return cgroupUsage{}, err
	}
	defer ref.close()
	cmd, root := b.runcCmd, b.runcRoot
	if runtime == "gvisor" {
		cmd, root = b.runscCmd, b.runscRoot()
		if err := os.MkdirAll(root, 0o700); err != nil {
			return cgroupUsage{}, err
		}
	}
	var names []string
	var bundles []*bundle
	defer func() {
		for i, name := range names {
			err = errors.Join(err, deleteContainer(ctx, cmd, root, name), bundles[i].remove())
		}
	}()
	for i := range aloneN {
		name := fmt.Sprintf("m%s%d", runtime[:1], i)
		bun, err := ref.prepare(filepath.Join(b.dir, name), name, b.cgroupParent, []string{"sleep", "infinity"})
		names, bundles = append(names, name), append(bundles, bun)
		if err != nil {
			return cgroupUsage{}, fmt.Errorf("prepare bundle %s: %w", name, err)
		}
		// #nosec G304 -- the bench's own bundle directory
		logf, err := os.Create(filepath.Join(bun.dir, "out.log"))
		if err != nil {
			return cgroupUsage{}, err
		}
		run := cmd(ctx, root, "run", "--detach", "--bundle", bun.dir, name)
		run.Stdout, run.Stderr = logf, logf
		err = run.Run()
		logf.Close()
		if err != nil {
			return cgroupUsage{}, fmt.Errorf("%s run --detach %s: %w", runtime, name, err)
		}
	}
	select {
	case <-ctx.Done():
		return cgroupUsage{}, ctx.Err()
	case <-time.After(settle):
	}
	var usage []cgroupUsage
	for _, name := range names {
		u, err := cgroupMemory("/" + b.cgroupParent + "/" + name)
		if err != nil {
			return cgroupUsage{}, fmt.Errorf("memory cgroup of %s: %w", name, err)
		}
		usage = append(usage, u)
	}
	slices.SortFunc(usage, func(a, b cgroupUsage) int { return cmp.Compare(a.usage, b.usage) })
	return usage[len(usage)/2], nil
}

// memoryRows are row (c)'s lines for one runtime: in the printed table and
// in docs/performance.md.
func memoryRows(runtime string, per []sandboxMemory, daemonGrowth int64, floor cgroupUsage) ([]row, []result) {
	pick := func(f func(sandboxMemory) int64) []int64 {
		out := make([]int64, len(per))
		for i, m := range per {
			out[i] = f(m)
		}
		return out
	}
	procs := strconv.FormatInt(median(pick(func(m sandboxMemory) int64 { return m.procs })), 10)
	usage := median(pick(func(m sandboxMemory) int64 { return m.usage }))
	rss := median(pick(func(m sandboxMemory) int64 { return m.rss }))
	cache := median(pick(func(m sandboxMemory) int64 { return m.cache }))
	kernel := median(pick(func(m sandboxMemory) int64 { return m.kernel }))
	rows := []row{
		bytesRow(runtime+": memory cgroup usage", pick(func(m sandboxMemory) int64 { return m.usage })),
		bytesRow("  of which rss (anonymous)", pick(func(m sandboxMemory) int64 { return m.rss })),
		bytesRow("  of which cache (page cache)", pick(func(m sandboxMemory) int64 { return m.cache })),
		bytesRow("  of which kernel memory", pick(func(m sandboxMemory) int64 { return m.kernel })),
		{label: "  processes in the sandbox's cgroup", median: procs, n: strconv.Itoa(len(per))},
		{label: "  the runtime alone, the same bundle running sleep: memory cgroup usage", median: fmtBytes(floor.usage), n: strconv.Itoa(aloneN)},
		{label: "  ratio to the runtime alone", median: fmtRatio(ratio(float64(usage), float64(floor.usage)))},
	}
	alone, limit, want := "runc", int64(idleRuncTarget), "≤ 3 MiB"
	if runtime != "runc" {
		alone, limit, want = "runsc", idleGvisorTarget, "≤ 12 MiB"
	}
	r := ratio(float64(usage), float64(floor.usage))
	sandbox := result{ID: "c/" + runtime, Topic: topicMemory, Hutch: bytesFig("", usage),
		Peers: []figure{bytesFig(fmt.Sprintf("the same bundle running `sleep` instead of the agent, started by `%s run --detach` alone (the runtime's own)", alone), floor.usage)},
		Ratio: []term{ratioTerm(r, "the runtime alone"), targetTerm(usage <= limit, want)}}
	if usage > limit && floor.usage > limit {
		sandbox.Ratio[1].Target.Note = "beyond this host's floor: the runtime alone takes " + fmtBytes(floor.usage)
	}
	rows[0].target = target(usage <= limit, want)
	if runtime == "runc" {
		sandbox.What = "memory per idle sandbox, runc, in its memory cgroup"
		sandbox.Hutch.Text += fmt.Sprintf(" (%s anonymous, %s kernel)", fmtBytes(rss), fmtBytes(kernel))
	} else {
		sandbox.What = fmt.Sprintf("memory per idle sandbox, gVisor (the Sentry and the gofer, %s processes)", procs)
		sandbox.Hutch.Text += fmt.Sprintf(" (%s anonymous, %s page cache)", fmtBytes(rss), fmtBytes(cache))
	}
	results := []result{sandbox}
	if runtime == "runc" {
		agentPSS := pick(func(m sandboxMemory) int64 { return m.agentPSS })
		pss := bytesRow("  agent PSS", agentPSS)
		met := median(agentPSS) <= 5<<20
		pss.target = target(met, "≤ 5 MiB")
		rows = append(rows, pss, bytesRow("  agent USS (private pages only)", pick(func(m sandboxMemory) int64 { return m.agentUSS })))
		results = append(results, result{ID: "c/agent-pss", Topic: topicMemory, What: "the agent's PSS, runc",
			Hutch: bytesFig("", median(agentPSS)), Ratio: []term{targetTerm(met, "≤ 5 MiB")}})
	}
	cost := usage + max(daemonGrowth, 0)
	density := (8 << 30) / max(cost, 1)
	what := "idle sandboxes in 8 GiB, gVisor"
	if runtime == "runc" {
		what = "idle sandboxes in 8 GiB, runc (its cgroup plus the daemon's growth per sandbox)"
	}
	results = append(results, result{ID: "c/density-" + runtime, Topic: topicMemory, What: what,
		Hutch: figure{Text: fmt.Sprintf("%s (%s each)", fmtCount(density), fmtBytes(cost)), Median: ptr(float64(density)), Unit: "sandboxes"}})
	return append(rows,
		row{label: "  daemon RSS growth per sandbox", median: fmtBytes(daemonGrowth), n: "1"},
		row{label: "  host memory per idle sandbox (cgroup + daemon)", median: fmtBytes(cost), n: "1"},
		row{label: "  idle sandboxes in 8 GiB at that cost", median: strconv.FormatInt(density, 10), n: "1"},
	), results
}

// sandboxMemory reads one sandbox's memory cgroup and, with agent, its
// agent's PSS and USS.
func (b *bench) sandboxMemory(id string, agent bool) (sandboxMemory, error) {
	var m sandboxMemory
	cg, err := cgroupPath(b.d.sandboxDir(id))
	if err != nil {
		return m, err
	}
	if m.cgroupUsage, err = cgroupMemory(cg); err != nil {
		return m, fmt.Errorf("memory cgroup of sandbox %s: %w", id, err)
	}
	if !agent {
		return m, nil // under gVisor the agent is no host process
	}
	pid, err := initPID(filepath.Join(b.d.runcRoot(), containerName(id)))
	if err != nil {
		return m, fmt.Errorf("agent of sandbox %s: %w", id, err)
	}
	m.agentPSS, m.agentUSS, err = agentMemory(pid)
	if err != nil {
		return m, fmt.Errorf("agent of sandbox %s: %w", id, err)
	}
	return m, nil
}

// agentMemory reads a process's PSS and USS (Private_Clean+Private_Dirty)
// from its smaps_rollup. PSS charges each shared page (the hutch binary's
// text, shared by every agent and the daemon) in part, so it falls as
// sandboxes are added; USS is what one more agent costs at the least.
func agentMemory(pid int) (pss, uss int64, err error) {
	path := fmt.Sprintf("/proc/%d/smaps_rollup", pid)
	if pss, err = kBField(path, "Pss"); err != nil {
		return 0, 0, err
	}
	clean, err := kBField(path, "Private_Clean")
	if err != nil {
		return 0, 0, err
	}
	dirty, err := kBField(path, "Private_Dirty")
	return pss, clean + dirty, err
}

// cgroupPath is linux.cgroupsPath of a bundle's config.json.
func cgroupPath(bundleDir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(bundleDir, "config.json"))
	if err != nil {
		return "", err
	}
	var cfg struct {
		Linux struct {
			CgroupsPath string `json:"cgroupsPath"`
		} `json:"linux"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return "", fmt.Errorf("decode %s/config.json: %w", bundleDir, err)
	}
	if cfg.Linux.CgroupsPath == "" {
		return "", fmt.Errorf("%s/config.json has no cgroupsPath", bundleDir)
	}
	return cfg.Linux.CgroupsPath, nil
}

// cgroupMemory reads a memory cgroup's account, from cgroup v1's memory
// controller or from cgroup v2.
func cgroupMemory(path string) (cgroupUsage, error) {
	var u cgroupUsage
	v1 := filepath.Join("/sys/fs/cgroup/memory", path)
	dir, usageFile, rssKey, cacheKey := v1, "memory.usage_in_bytes", "rss", "cache"
	if _, err := os.Stat(v1); err != nil {
		dir, usageFile, rssKey, cacheKey = filepath.Join("/sys/fs/cgroup", path), "memory.current", "anon", "file"
	}
	var err error
	if u.usage, err = readInt(filepath.Join(dir, usageFile)); err != nil {
		return u, err
	}
	stat, err := readStat(filepath.Join(dir, "memory.stat"))
	if err != nil {
		return u, err
	}
	u.rss, u.cache, u.kernel = stat[rssKey], stat[cacheKey], stat["kernel"]
	if dir == v1 {
		if u.kernel, err = readInt(filepath.Join(dir, "memory.kmem.usage_in_bytes")); err != nil {
			return u, err
		}
	}
	pids, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	u.procs = int64(len(strings.Fields(string(pids))))
	return u, err
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// readStat reads a "key value" per line file such as memory.stat.
func readStat(path string) (map[string]int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if n, err := strconv.ParseInt(v, 10, 64); ok && err == nil {
			out[k] = n
		}
	}
	return out, nil
}

// initPID is the host pid of a runc container's first process, from the
// state.json in its state directory.
func initPID(stateDir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(stateDir, "state.json"))
	if err != nil {
		return 0, err
	}
	var st struct {
		InitProcessPID int `json:"init_process_pid"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return 0, fmt.Errorf("decode %s/state.json: %w", stateDir, err)
	}
	if st.InitProcessPID <= 0 {
		return 0, fmt.Errorf("%s/state.json has no init_process_pid", stateDir)
	}
	return st.InitProcessPID, nil
}
