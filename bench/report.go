package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// section is one group of rows of the result table.
type section struct {
	title string
	rows  []row
}

// row is one line of the table: a measurement, or a ratio or difference of
// two. target is empty, or its target (docs/performance.md) with PASS or MISS.
type row struct {
	label  string
	median string
	p90    string
	n      string
	target string
}

// durationRow is the row of a timed peer.
func durationRow(label string, v []time.Duration) row {
	return row{label: label, median: fmtDuration(median(v)), p90: fmtDuration(p90(v)), n: strconv.Itoa(len(v))}
}

// bytesRow is the row of a memory measurement.
func bytesRow(label string, v []int64) row {
	return row{label: label, median: fmtBytes(median(v)), p90: fmtBytes(p90(v)), n: strconv.Itoa(len(v))}
}

// target says whether a measured value met its target (docs/performance.md).
func target(ok bool, want string) string {
	if ok {
		return "PASS  " + want
	}
	return "MISS  " + want
}

// hostInfo is what the numbers were measured on.
type hostInfo struct {
	date    string
	kernel  string
	cpu     string
	cpus    int
	runc    string
	goVer   string
	hutch   string
	binPath string
}

func collectHostInfo(ctx context.Context, runcPath, hutchVersion, hutchPath string) hostInfo {
	h := hostInfo{
		date:    time.Now().Format("2006-01-02 15:04:05 MST"),
		kernel:  readTrimmed("/proc/sys/kernel/osrelease"),
		cpu:     cpuModel(),
		cpus:    runtime.NumCPU(),
		goVer:   runtime.Version(),
		hutch:   hutchVersion,
		binPath: hutchPath,
	}
	if out, err := exec.CommandContext(ctx, runcPath, "--version").Output(); err == nil {
		h.runc = strings.ReplaceAll(strings.TrimSpace(string(out)), "\n", ", ")
	}
	return h
}

func readTrimmed(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

// cpuModel is the first "model name" of /proc/cpuinfo.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func printHeader(w *strings.Builder, h hostInfo) {
	fmt.Fprintf(w, "Hutch benchmark, %s\n", h.date)
	fmt.Fprintf(w, "  kernel  %s\n", h.kernel)
	fmt.Fprintf(w, "  cpu     %s × %d\n", h.cpu, h.cpus)
	fmt.Fprintf(w, "  runc    %s\n", h.runc)
	fmt.Fprintf(w, "  hutch   %s (%s), bench built with %s\n", h.hutch, h.binPath, h.goVer)
	fmt.Fprintln(w)
}

// printTable prints the sections as one table, labels aligned left and
// numbers right, and returns how many targets were missed.
func printTable(w *strings.Builder, sections []section) (missed int) {
	head := row{median: "median", p90: "p90", n: "n"}
	widths := [4]int{}
	fit := func(r row, indent int) {
		for i, cell := range []string{strings.Repeat(" ", indent) + r.label, r.median, r.p90, r.n} {
			widths[i] = max(widths[i], utf8.RuneCountInString(cell))
		}
	}
	fit(head, 0)
	for _, s := range sections {
		fit(row{label: s.title}, 0)
		for _, r := range s.rows {
			fit(r, 2)
		}
	}
	line := func(label string, r row) {
		l := fmt.Sprintf("%-*s  %*s  %*s  %*s  %s", widths[0], label, widths[1], r.median, widths[2], r.p90, widths[3], r.n, r.target)
		fmt.Fprintln(w, strings.TrimRight(l, " "))
	}
	line("", head)
	for _, s := range sections {
		fmt.Fprintln(w, s.title)
		for _, r := range s.rows {
			line("  "+r.label, r)
			if strings.HasPrefix(r.target, "MISS") {
				missed++
			}
		}
	}
	return missed
}
