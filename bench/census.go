package main

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/nftables"

	"github.com/hutchdev/hutch/internal/runtime/disk"
)

// census counts what a daemon and its sandboxes hold on the host: what a
// leak would leave more of. The soak takes one before and one after, with
// no sandbox of its own left, and any count that grew is a leak.
type census struct {
	counts []count
	rss    int64 // the daemon's resident memory: told, not a leak by itself
	userns int   // user namespaces the daemon keeps for id ranges: told
}

type count struct {
	what string
	n    int
}

// leakSlack is how many more of a count are not a leak: goroutines come
// and go with the connections of clients that just left.
var leakSlack = map[string]int{"daemon goroutines": 10, "daemon file descriptors": 4}

// takeCensus counts the daemon's holdings now; cgroups and processes are
// counted for the sandboxes made so far, ids (another daemon may run
// beside this one). It first waits for the teardowns of deleted sandboxes
// to end.
func (b *bench) takeCensus(ctx context.Context, d *daemon, ids map[string]bool) (census, error) {
	var c census
	var h struct{ deleting, goroutines int }
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		health, err := d.client.Health(ctx)
		if err != nil {
			return c, fmt.Errorf("census: %w", err)
		}
		h.deleting, h.goroutines = health.Deleting, health.Goroutines
		if h.deleting == 0 {
			break
		}
		if time.Now().After(deadline) {
			return c, fmt.Errorf("census: %d teardowns still under way after 2 minutes", h.deleting)
		}
	}
	base := filepath.Dir(d.dataDir)
	add := func(what string, n int) { c.counts = append(c.counts, count{what, n}) }
	mounts, err := linesWith("/proc/self/mountinfo", base)
	if err != nil {
		return c, err
	}
	add("mounts under the daemon's directories", mounts)
	loops := 0
	for _, image := range disk.Backing() {
		if strings.HasPrefix(image, base) {
			loops++
		}
	}
	add("loop devices of its disks", loops)
	cgroups := 0
	for _, hier := range []string{"memory", "pids", "cpu", "unified"} {
		entries, _ := os.ReadDir(filepath.Join("/sys/fs/cgroup", hier, "hutch"))
		for _, e := range entries {
			if e.IsDir() && ids[e.Name()] {
				cgroups++
			}
		}
	}
	add("sandbox cgroups", cgroups)
	netns, _ := filepath.Glob(filepath.Join(d.runDir, "netns", "*", "*"))
	add("network namespaces", len(netns))
	links, _ := os.ReadDir("/sys/class/net")
	add("host network interfaces", len(links))
	tables, err := nftTables()
	if err != nil {
		return c, err
	}
	add("host nftables tables", tables)
	for name, bin := range map[string]string{"runc": b.runc, "runsc": b.runsc} {
		if bin != "" {
			add(name+" containers", containers(ctx, bin, filepath.Join(d.runDir, name)))
		}
	}
	add("processes in sandbox cgroups", sandboxProcesses(ids))
	fdDir := fmt.Sprintf("/proc/%d/fd", d.cmd.Process.Pid)
	fds, err := os.ReadDir(fdDir)
	if err != nil {
		return c, err
	}
	open := 0
	for _, fd := range fds {
		// The user namespaces of id ranges are kept for the next sandbox
		// given that range: as many as were in use at once, not a leak.
		if link, _ := os.Readlink(filepath.Join(fdDir, fd.Name())); strings.HasPrefix(link, "user:") {
			c.userns++
		} else {
			open++
		}
	}
	add("daemon file descriptors", open)
	add("daemon goroutines", h.goroutines)
	files := 0
	_ = filepath.WalkDir(d.dataDir, func(_ string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			files++
		}
		return nil
	})
	add("files in the data dir", files)
	c.rss, err = d.rss()
	return c, err
}

// leaks says what grew from before to after, beyond its slack.
func leaks(before, after census) []string {
	var out []string
	for i, a := range after.counts {
		if b := before.counts[i]; a.n > b.n+leakSlack[a.what] {
			out = append(out, fmt.Sprintf("%s: %d before, %d after", a.what, b.n, a.n))
		}
	}
	return out
}

// printCensus writes the two censuses side by side.
func printCensus(w *strings.Builder, before, after census) {
	fmt.Fprintf(w, "\nleak census                                        before    after\n")
	for i, a := range after.counts {
		mark := ""
		if a.n > before.counts[i].n+leakSlack[a.what] {
			mark = "  LEAK"
		}
		fmt.Fprintf(w, "  %-46s %7d  %7d%s\n", a.what, before.counts[i].n, a.n, mark)
	}
	fmt.Fprintf(w, "  %-46s %7d  %7d\n", "user namespaces kept (one per id range in use at once)", before.userns, after.userns)
	fmt.Fprintf(w, "  %-46s %7s  %7s\n", "daemon resident memory", fmtBytes(before.rss), fmtBytes(after.rss))
}

func linesWith(path, s string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.Contains(sc.Text(), s) {
			n++
		}
	}
	return n, sc.Err()
}

// nftTables counts the host network namespace's nftables tables, over
// netlink as the daemon makes them (the nft command is not a
// prerequisite).
func nftTables() (int, error) {
	c, err := nftables.New()
	if err != nil {
		return 0, fmt.Errorf("count nftables tables: %w", err)
	}
	tables, err := c.ListTables()
	if err != nil {
		return 0, fmt.Errorf("count nftables tables: %w", err)
	}
	return len(tables), nil
}

// containers counts a runtime's containers under root.
func containers(ctx context.Context, bin, root string) int {
	out, err := exec.CommandContext(ctx, bin, "--root", root, "list", "--quiet").Output()
	if err != nil {
		return 0 // no state root: none
	}
	return len(strings.Fields(string(out)))
}

// sandboxProcesses counts the host's processes in the cgroup of one of
// the sandboxes ids.
func sandboxProcesses(ids map[string]bool) int {
	entries, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(b)) {
			_, rest, ok := strings.Cut(strings.TrimSpace(line), "/hutch/")
			if id, _, _ := strings.Cut(rest, "/"); ok && ids[id] {
				n++
				break
			}
		}
	}
	return n
}
