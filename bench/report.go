package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// section is one group of rows of the result table, and the lines of
// docs/performance.md they give (results.go).
type section struct {
	title   string
	rows    []row
	results []result
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
