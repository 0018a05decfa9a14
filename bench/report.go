package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"
)

// section is one group of rows of the result table.
type section struct {
	title string
	rows  []row
}

// row is one line of the table: a measurement, or a ratio or difference of
// two. target is empty, or the README's target with PASS or MISS.
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

// target says whether a measured value met the README's target.
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
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func printHeader(w io.Writer, h hostInfo) {
	fmt.Fprintf(w, "Hutch benchmark, %s\n", h.date)
	fmt.Fprintf(w, "  kernel  %s\n", h.kernel)
	fmt.Fprintf(w, "  cpu     %s × %d\n", h.cpu, h.cpus)
	fmt.Fprintf(w, "  runc    %s\n", h.runc)
	fmt.Fprintf(w, "  hutch   %s (%s), bench built with %s\n", h.hutch, h.binPath, h.goVer)
	fmt.Fprintln(w)
}

// printTable prints the sections as one aligned table and returns how many
// targets were missed. Labels are padded by hand so that they stay left
// aligned while the numbers align right.
func printTable(w io.Writer, sections []section) (missed int) {
	width := 0
	for _, s := range sections {
		width = max(width, utf8.RuneCountInString(s.title))
		for _, r := range s.rows {
			width = max(width, 2+utf8.RuneCountInString(r.label))
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%-*s\tmedian\tp90\tn\t\n", width, "")
	for _, s := range sections {
		fmt.Fprintf(tw, "%-*s\t\t\t\t\n", width, s.title)
		for _, r := range s.rows {
			fmt.Fprintf(tw, "%-*s\t%s\t%s\t%s\t  %s\n", width, "  "+r.label, r.median, r.p90, r.n, r.target)
			if strings.HasPrefix(r.target, "MISS") {
				missed++
			}
		}
	}
	tw.Flush()
	return missed
}
