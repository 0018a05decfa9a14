package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"unicode/utf8"
)

// docs/performance.md, written from the results file (results.go) by
// `go run ./bench -write-doc docs/performance.md -from bench/results.json`,
// which `make bench` runs after measuring: an introduction, then one table
// per topic, its lines in the file's order. What follows handMarker in the
// page (the soak's and the fuzzers' tables, whose figures come from
// `make soak` and `make fuzz`, not from the bench's rows) is written by
// hand and copied through as it is.

// handMarker begins the part of the page written by hand.
const handMarker = "<!-- Written by hand from make soak and make fuzz: go run ./bench -write-doc keeps what follows as it is. -->"

// docHead is the page down to the machines the figures are from.
const docHead = `# Performance

These tables are written by ` + "`make bench`" + ` from
[bench/results.json](../bench/results.json); do not edit them by hand. Only
the Soak and Fuzzing tables at the end are written by hand, from ` + "`make soak`" + `
and ` + "`make fuzz`" + `.

` + "`make bench`" + ` measures Hutch side by side with what a user would otherwise
reach for (` + "`runc run`, `runsc run`, `runc exec`" + `, a bare fork/exec, a
kernel through jupyter_client, a server on the host, …), in one run with
the peers interleaved, and prints medians, p90s and ratios; ` + "`go run ./bench\n-hutch bin/hutch -rows X`" + ` measures only the rows named by letter, as each
line's command says. ` + "`make soak`" + ` runs the soak and the crash matrix
([development.md](development.md#reliability-suites)). Each starts a daemon
of its own on temporary directories and removes everything it made; they
need root, runc and unshare.

` + "`make bench`" + ` records its figures in bench/results.json and writes this page
from it: ` + "`make bench BENCHFLAGS='-rows ah'`" + ` measures rows (a) and (h) only,
and every other line keeps its last figures; ` + "`go run ./bench -write-doc\ndocs/performance.md -from bench/results.json`" + ` writes the page again without
measuring. Each figure is the median of its row's rounds, and a ratio
compares figures of the same run, the peers interleaved round by round; a
range is the spread of several runs. Where a figure has a target, ` + "`make\nbench`" + ` prints it beside the figure with PASS or MISS, and the ratio column
says whether it was met.
`

// docMiddle follows the machines, before the tables.
const docMiddle = `On a virtual machine page faults, context switches and system calls are
slow, and the figures move with the host by as much as ±20% within a day:
read the ratios more than the milliseconds. The floors say what the host
itself costs: a fork/exec inside gVisor alone (row (e)) is one no daemon
can go below, a bare fork/exec on the host (row (b)) another.

The daemon runs with a timer slack of 1 ms rather than the kernel's 50 µs,
and runc, runc's init and the agent inherit it (see
internal/base/timerslack): each is a Go program whose runtime wakes a
monitor thread every 20 µs while the program is busy, each wakeup two
context switches, which a virtual machine makes dear. Under the soak's 20
clients that halves the daemon's context switches (~215 → ~118 a
lifecycle) and takes ~14% off the machine's CPU a lifecycle, runc's,
its init's, the agent's and the daemon's alike. A sandbox's own processes
start with the kernel's default, and so do gVisor's, whose kernel keeps
the sandbox's time; the floors run runc as a user would, with the default
(the soak's table says what runc alone makes given 1 ms too).

Where the time goes: a create is the sandbox's disk (taken from a pool of
ready ones), an idmapped tree of the template, the overlay mount and the
bundle (~2–3 ms), ` + "`runc run --detach`" + ` (the work the peer does too), the
link to the sandbox's network (a router namespace and its rules, made
meanwhile on a goroutine of their own) and two SQLite writes (~0.5 ms);
the first exec waits in the agent's socket while
the agent (its own 11 MB binary, given GOMAXPROCS=1 at its exec: ~4.2
ms of CPU natively from exec through its first answer to its kill, 4.9
when Go's runtime started on both CPUs first; an empty Go program's start
~1.5; 118 package inits) starts; under
gVisor, whose agent listens itself, the first call's dial waits for it,
and the agent's start is most of the gap to ` + "`runsc run`" + ` (row (d) runs the
runtime with the agent beside it), and then the first exec is a fork/exec
inside gVisor. That start is system calls, mostly the Go runtime's: gVisor
serves each, ~40 µs here (getpid 28–50 µs), and for about a second after
a sandbox starts a clock read is one too (its vDSO waits for two samples
of the host's clock a second apart: time.Now 40–42 µs then, under 0.2 µs
after). The agent makes ~370 before it listens (114 of them the runtime
setting its signal handlers) and ~390 more for the first command (190
clock reads and 62 sleeps, three in four of them by Go's monitor thread):
~30 ms of the gap at this host's cost. GOMAXPROCS=2 changed nothing
(1.46× against 1.47×).
runc starts each sandbox from a mount namespace of its own, so that a
create does not copy and walk the mounts of every sandbox already there
(three each). What still grows as idle sandboxes accumulate is the kernel's
work per process and thread on the host: ` + "`pivot_root`" + ` visits every thread
(each sandbox brings its agent's 7 and ~15 kernel threads of its btrfs
disk), so row (q) runs ` + "`runc run`" + ` alone beside them as the floor. The
agent makes no threads ahead for a sandbox at its process limit: under runc
the sandbox's processes have a pids cgroup of their own below the agent's,
under gVisor the agent is exempt from the limit. An
exec is HTTP to the daemon, Connect over a unix socket
to the agent, and a fork/exec by the agent itself; ` + "`runc exec`" + ` pays for a
new ` + "`runc`, `runc init`" + ` and joining the namespaces.
`

// renderDoc is the page: the results' tables, then hand, the part written
// by hand (from handMarker on, or "").
func renderDoc(rs []result, hand string) string {
	var w strings.Builder
	w.WriteString(docHead)
	w.WriteString("\n")
	writeMachines(&w, rs)
	w.WriteString("\n")
	w.WriteString(docMiddle)
	var topics []string
	for _, r := range rs {
		if !slices.Contains(topics, r.Topic) {
			topics = append(topics, r.Topic)
		}
	}
	for _, topic := range topics {
		fmt.Fprintf(&w, "\n## %s\n\n", topic)
		w.WriteString("| what | Hutch | peer or floor | ratio | command |\n|---|---|---|---|---|\n")
		for _, r := range rs {
			if r.Topic == topic {
				w.WriteString("|")
				for _, c := range []string{r.What, r.Hutch.Text, peersCell(r.Peers), ratioCell(r.Ratio), "`" + r.Command + "`"} {
					if c != "" {
						w.WriteString(" " + cell(c))
					}
					w.WriteString(" |")
				}
				w.WriteString("\n")
			}
		}
	}
	if hand != "" {
		w.WriteString("\n")
		w.WriteString(hand)
	}
	return w.String()
}

// writeMachines says which machine each line was measured on, and when.
func writeMachines(w *strings.Builder, rs []result) {
	type machine struct {
		describe string
		letters  []string
		other    bool     // lines measured otherwise than by a row of the bench
		dates    []string // days measured
		unknown  bool     // lines without a time: written by hand before the bench recorded them
	}
	var ms []*machine
	for _, r := range rs {
		d := r.Host.describe()
		i := slices.IndexFunc(ms, func(m *machine) bool { return m.describe == d })
		if i < 0 {
			ms, i = append(ms, &machine{describe: d}), len(ms)
		}
		m := ms[i]
		switch {
		case r.Row == "":
			m.other = true
		case !slices.Contains(m.letters, r.Row):
			m.letters = append(m.letters, r.Row)
		}
		if day, _, _ := strings.Cut(r.Measured, "T"); day == "" {
			m.unknown = true
		} else if !slices.Contains(m.dates, day) {
			m.dates = append(m.dates, day)
		}
	}
	if len(ms) == 1 {
		w.WriteString(wrap("", fmt.Sprintf("The figures were measured on one machine, %s, %s.", ms[0].describe, when(ms[0].dates, ms[0].unknown)), "") + "\n")
		return
	}
	w.WriteString(wrap("", "The figures were measured on these machines, each line in one run on one of them:", "") + "\n\n")
	for _, m := range ms {
		slices.Sort(m.letters)
		var what []string
		switch len(m.letters) {
		case 0:
		case 1:
			what = append(what, "row ("+m.letters[0]+")")
		default:
			what = append(what, "rows ("+strings.Join(m.letters, "), (")+")")
		}
		if m.other {
			what = append(what, "the lines measured otherwise")
		}
		w.WriteString(wrap("* ", fmt.Sprintf("%s: %s, %s.", m.describe, strings.Join(what, " and "), when(m.dates, m.unknown)), "  ") + "\n")
	}
}

// when says when lines were measured, by day.
func when(dates []string, unknown bool) string {
	slices.Sort(dates)
	var parts []string
	switch len(dates) {
	case 0:
	case 1:
		parts = append(parts, "on "+dates[0])
	default:
		parts = append(parts, "from "+dates[0]+" to "+dates[len(dates)-1])
	}
	if unknown {
		parts = append(parts, "in runs before `make bench` recorded them (the latest known figures, written by hand)")
	}
	return strings.Join(parts, " and ")
}

// peersCell is the peers, each with its figure.
func peersCell(ps []figure) string {
	var out []string
	for _, p := range ps {
		if p.Text == "" {
			out = append(out, p.Name)
		} else {
			out = append(out, p.Name+": "+p.Text)
		}
	}
	return strings.Join(out, "; ")
}

// ratioCell is the comparisons: "1.28× `runc run` (target ≤ 1.3×: met)",
// or a target alone, "target ≤ 5 ms: met".
func ratioCell(ts []term) string {
	var out []string
	for _, t := range ts {
		switch {
		case t.Target == nil:
			out = append(out, t.Text)
		case t.Text == "":
			out = append(out, t.Target.render(" (", ")"))
		default:
			out = append(out, t.Text+" ("+t.Target.render(", ", "")+")")
		}
	}
	return strings.Join(out, "; ")
}

// render is "target ≤ 1 ms: met", with its note between open and end.
func (g goal) render(open, end string) string {
	s := "target " + g.Want
	switch {
	case g.Met == nil && g.Note != "":
		return s + ": " + g.Note
	case g.Met == nil:
		return s
	case *g.Met:
		s += ": met"
	default:
		s += ": missed"
	}
	if g.Note != "" {
		s += open + g.Note + end
	}
	return s
}

// wrap breaks s into lines of at most 76 characters where it can, the
// first line after prefix, the others after indent.
func wrap(prefix, s, indent string) string {
	var lines []string
	line, empty := prefix, true
	for _, word := range strings.Fields(s) {
		if !empty && utf8.RuneCountInString(line)+1+utf8.RuneCountInString(word) > 76 {
			lines, line, empty = append(lines, line), indent, true
		}
		if !empty {
			line += " "
		}
		line, empty = line+word, false
	}
	return strings.Join(append(lines, line), "\n")
}

// cell makes s safe in a table's cell.
func cell(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ")
}

// handPart is the part of a page written by hand: from handMarker to the
// end, or "" when the page has none.
func handPart(page string) string {
	if i := strings.Index(page, handMarker); i >= 0 {
		return page[i:]
	}
	return ""
}

// writeDoc writes the page at docPath from the results file at from,
// keeping the part of the page written by hand.
func writeDoc(docPath, from string) error {
	f, err := readResults(from)
	if err != nil {
		return err
	}
	if len(f.Results) == 0 {
		return fmt.Errorf("%s has no results", from)
	}
	old, err := os.ReadFile(docPath)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return writeFile(docPath, []byte(renderDoc(f.Results, handPart(string(old)))))
}
