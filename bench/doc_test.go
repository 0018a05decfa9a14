package main

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// testHost is a machine of the tests.
var testHost = hostInfo{CPU: "Test CPU", Cores: 4, Memory: "8 GiB", OS: "Debian 12", Kernel: "6.1", Runc: "1.2.0"}

func testResults() []result {
	return []result{
		{ID: "a/create", Row: "a", Topic: "Create", What: "create → first output",
			Hutch:   durationFig("", 40*time.Millisecond),
			Peers:   []figure{durationFig("`runc run`", 32*time.Millisecond), {Name: "a floor with no figure"}},
			Ratio:   []term{ratioTerm(1.25, "`runc run`").with(true, "≤ 1.3×"), targetTerm(false, "≤ 30 ms")},
			Command: "go run ./bench -hutch bin/hutch -rows a", Host: testHost, Measured: "2026-05-01T10:00:00Z"},
		{ID: "b/exec", Row: "b", Topic: "Create", What: "exec | pipe",
			Hutch:   figure{Text: "2.1–2.4 ms"},
			Command: "go run ./bench -hutch bin/hutch -rows b", Host: testHost},
		{ID: "c/memory", Row: "c", Topic: "Memory", What: "memory per idle sandbox",
			Hutch:   bytesFig("", 4<<20),
			Command: "go run ./bench -hutch bin/hutch -rows c", Host: testHost, Measured: "2026-05-02T10:00:00Z"},
	}
}

func TestRenderDocTables(t *testing.T) {
	hand := handMarker + "\n\n## Soak\n\nby hand\n"
	page := renderDoc(testResults(), hand)

	for _, want := range []string{
		"\n## Create\n\n| what | Hutch | peer or floor | ratio | command |\n|---|---|---|---|---|\n" +
			"| create → first output | 40.0 ms | `runc run`: 32.0 ms; a floor with no figure | 1.25× `runc run` (target ≤ 1.3×: met); target ≤ 30 ms: missed | `go run ./bench -hutch bin/hutch -rows a` |\n" +
			"| exec \\| pipe | 2.1–2.4 ms | | | `go run ./bench -hutch bin/hutch -rows b` |\n",
		"\n## Memory\n\n| what | Hutch | peer or floor | ratio | command |\n|---|---|---|---|---|\n" +
			"| memory per idle sandbox | 4.00 MiB | | | `go run ./bench -hutch bin/hutch -rows c` |\n",
		"|\n\n" + hand,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks\n%s\nit is:\n%s", want, page)
		}
	}
	machine := "The figures were measured on one machine, 4 cores (Test CPU), 8 GiB, Debian 12, kernel 6.1, runc 1.2.0, " +
		"from 2026-05-01 to 2026-05-02 and in runs before `make bench` recorded them (the latest known figures, written by hand)."
	if !strings.Contains(unwrapped(page), machine) {
		t.Errorf("the page lacks\n%s\nit is:\n%s", machine, page)
	}
	for _, line := range strings.Split(page, "\n") {
		if !strings.HasPrefix(line, "|") && line != handMarker && utf8.RuneCountInString(line) > 80 {
			t.Errorf("a line of prose is longer than 80 characters: %q", line)
		}
	}
	if strings.Index(page, "## Create") > strings.Index(page, "## Memory") {
		t.Error("the topics are not in the order of the results")
	}
	if got := renderDoc(testResults(), ""); strings.Contains(got, handMarker) {
		t.Error("a page without a part written by hand got one")
	}
}

func TestRenderDocMachines(t *testing.T) {
	rs := testResults()
	other := hostInfo{CPU: "Other CPU", Cores: 2, Virtual: true, Memory: "4 GiB", OS: "Ubuntu 24.04", Kernel: "6.8", Runc: "1.1.12"}
	rs = merge(rs, stamp([]result{{ID: "c/memory", Topic: "Memory", What: "memory", Hutch: figure{Text: "5 MiB"}}},
		"c", "go run ./bench -hutch bin/hutch -rows c", other, time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)))
	page := renderDoc(rs, "")
	for _, want := range []string{
		"The figures were measured on these machines, each line in one run on one of them: " +
			"* 4 cores (Test CPU), 8 GiB, Debian 12, kernel 6.1, runc 1.2.0: rows (a), (b), on 2026-05-01 and in runs before `make bench` recorded them " +
			"(the latest known figures, written by hand). " +
			"* 2 vCPUs (Other CPU), 4 GiB, Ubuntu 24.04, kernel 6.8, runc 1.1.12: row (c), on 2026-06-01. ",
	} {
		if !strings.Contains(unwrapped(page), want) {
			t.Errorf("the page lacks\n%s\nit is:\n%s", want, page)
		}
	}
	if !strings.Contains(page, "\n* 2 vCPUs") || !strings.Contains(page, "\n  (c), on 2026-06-01.\n") {
		t.Errorf("the machines are not a list, its items indented:\n%s", page)
	}
}

// unwrapped is s with its lines joined and spaces collapsed.
func unwrapped(s string) string { return strings.Join(strings.Fields(s), " ") }

func TestRatioCell(t *testing.T) {
	tests := []struct {
		name string
		in   []term
		want string
	}{
		{"a ratio", []term{ratioTerm(0.5, "the veth")}, "0.50× the veth"},
		{"a ratio and its target", []term{ratioTerm(1.56, "`runsc run`").with(false, "≤ 1.2×")}, "1.56× `runsc run` (target ≤ 1.2×: missed)"},
		{"a target alone", []term{targetTerm(true, "≤ 5 ms")}, "target ≤ 5 ms: met"},
		{"a target alone, with a note", []term{{Target: &goal{Want: "≤ 5 ms", Met: ptr(false), Note: "the floor is above it"}}},
			"target ≤ 5 ms: missed (the floor is above it)"},
		{"a ratio, its target and a note", []term{{Text: "0.42× direct", Target: &goal{Want: "≥ 0.5×", Met: ptr(false), Note: "as by the relay"}}},
			"0.42× direct (target ≥ 0.5×: missed, as by the relay)"},
		{"a range across its target", []term{{Text: "0.39–0.58×", Target: &goal{Want: "≥ 0.5×"}}}, "0.39–0.58× (target ≥ 0.5×)"},
		{"how often it was met", []term{{Text: "+0.61–1.01 ms", Target: &goal{Want: "≤ 1 ms", Note: "met in 2 of 3 runs"}}},
			"+0.61–1.01 ms (target ≤ 1 ms: met in 2 of 3 runs)"},
		{"several", []term{deltaTerm(-1500*time.Microsecond, "over a fork/exec"), ratioTerm(2, "")}, "−1.50 ms over a fork/exec; 2.00×"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ratioCell(tt.in); got != tt.want {
				t.Errorf("ratioCell = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestMerge(t *testing.T) {
	old := testResults()
	fresh := []result{
		{ID: "a/create", Topic: "Create", What: "create, again", Hutch: figure{Text: "39 ms"}},
		{ID: "a/new", Topic: "Create", What: "a new line of a table", Hutch: figure{Text: "1 ms"}},
		{ID: "z/new", Topic: "New topic", What: "a new table", Hutch: figure{Text: "2 ms"}},
	}
	got := merge(old, fresh)
	var ids []string
	for _, r := range got {
		ids = append(ids, r.ID)
	}
	if want := []string{"a/create", "b/exec", "a/new", "c/memory", "z/new"}; !slices.Equal(ids, want) {
		t.Fatalf("merged IDs = %v, want %v", ids, want)
	}
	if got[0].What != "create, again" {
		t.Errorf("a/create was not replaced: %+v", got[0])
	}
	if got[1].Hutch.Text != old[1].Hutch.Text || got[3].Hutch.Text != old[2].Hutch.Text {
		t.Error("lines not measured again lost their figures")
	}
	if old[0].What != "create → first output" {
		t.Error("merge changed its input")
	}
}

// TestSaveResultsPartial is a run of one row into a results file of
// several: the other rows keep their figures, and the page written from
// the file still has every table.
func TestSaveResultsPartial(t *testing.T) {
	path := filepath.Join(t.TempDir(), "results.json")
	if err := saveResults(path, testResults()); err != nil {
		t.Fatal(err)
	}
	run := stamp([]result{{ID: "c/memory", Topic: "Memory", What: "memory per idle sandbox", Hutch: bytesFig("", 5<<20)}},
		"c", "go run ./bench -hutch bin/hutch -rows c", testHost, time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC))
	if err := saveResults(path, run); err != nil {
		t.Fatal(err)
	}
	f, err := readResults(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Results) != 3 {
		t.Fatalf("%d results, want 3: %+v", len(f.Results), f.Results)
	}
	if got := f.Results[2]; got.Hutch.Text != "5.00 MiB" || *got.Hutch.Median != 5 || got.Measured != "2026-06-01T00:00:00Z" || got.Row != "c" {
		t.Errorf("the row measured again is %+v", got)
	}
	if got := f.Results[0]; got.Hutch.Text != "40.0 ms" || got.Measured != "2026-05-01T10:00:00Z" {
		t.Errorf("a row not measured again is %+v", got)
	}
	page := renderDoc(f.Results, "")
	for _, want := range []string{"## Create", "## Memory", "| 40.0 ms |", "| 5.00 MiB |"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}

func TestReadResultsInvalid(t *testing.T) {
	path := filepath.Join(t.TempDir(), "results.json")
	if err := os.WriteFile(path, []byte(`{"results": [{"id": "a"}, {"id": "a"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readResults(path); err == nil {
		t.Error("a file with a line twice and lines without figures was read")
	}
}

// TestCommittedDoc keeps docs/performance.md what the generator writes
// from bench/results.json: the page is not edited by hand.
func TestCommittedDoc(t *testing.T) {
	page, err := os.ReadFile("../docs/performance.md")
	if err != nil {
		t.Fatal(err)
	}
	f, err := readResults("results.json")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), handMarker) {
		t.Errorf("docs/performance.md lacks the line that begins its part written by hand:\n%s", handMarker)
	}
	if want := renderDoc(f.Results, handPart(string(page))); string(page) != want {
		t.Errorf("docs/performance.md is not what the bench writes from bench/results.json: change the results file " +
			"(or bench/doc.go), then run go run ./bench -write-doc docs/performance.md -from bench/results.json")
	}
}

// TestResultIDs checks that the lines the bench's rows make have the IDs
// and topics of the committed results file, so that measuring a row again
// replaces its lines instead of adding others.
func TestResultIDs(t *testing.T) {
	f, err := readResults("results.json")
	if err != nil {
		t.Fatal(err)
	}
	committed := map[string]string{}
	for _, r := range f.Results {
		committed[r.ID] = r.Topic
	}
	ms := []time.Duration{time.Millisecond, 2 * time.Millisecond}
	var made []result
	made = append(made, createSection(ms, ms, ms, ms, ms, ms, ms).results...)
	made = append(made, execSection(ms, ms, ms, ms, ms).results...)
	made = append(made, gvisorExecResults(3, 2, 1, 1)...)
	for _, rt := range []string{"runc", "gvisor"} {
		_, rs := memoryRows(rt, []sandboxMemory{{cgroupUsage: cgroupUsage{usage: 4 << 20}}}, 1<<20, cgroupUsage{usage: 2 << 20})
		made = append(made, rs...)
		made = append(made, suspendResults(rt, 1, 1, 1, 1, 1, 2, "≤ 2 ns")...)
	}
	made = append(made, codeSection(ms, ms, ms, ms).results...)
	made = append(made, previewResults(ms, ms, []float64{1}, []float64{1}, []float64{1}, ms)...)
	for _, r := range made {
		if topic, ok := committed[r.ID]; !ok || topic != r.Topic {
			t.Errorf("the bench makes line %s of %q; bench/results.json has it of %q", r.ID, r.Topic, topic)
		}
	}
}

func TestCommand(t *testing.T) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.String("hutch", "bin/hutch", "")
	fs.String("rows", "", "")
	fs.String("json", "", "")
	fs.Int("n", 50, "")
	fs.Int("create-n", 60, "")
	fs.Int("soak-n", 2000, "")
	fs.String("e2b-sdk", "test/e2b", "")
	if err := fs.Parse([]string{"-hutch", "bin/hutch", "-rows", "ab", "-json", "x.json", "-n", "150", "-soak-n", "3", "-e2b-sdk", "my sdk"}); err != nil {
		t.Fatal(err)
	}
	b := &bench{cfg: config{hutchArg: "bin/hutch", args: commandArgs(fs)}}
	if got, want := b.command("a"), "go run ./bench -hutch bin/hutch -rows a -e2b-sdk 'my sdk' -n 150"; got != want {
		t.Errorf("command = %q, want %q", got, want)
	}
}
