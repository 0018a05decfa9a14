package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The bench's results, as `-json FILE` records them: what docs/performance.md
// is written from (doc.go). The file is committed (bench/results.json), so
// that the page can be written again without measuring, and a run of a few
// rows (-rows) replaces only their lines, keeping the others' last figures.

// resultsFile is the JSON file: the lines of docs/performance.md's tables,
// in the order they are shown.
type resultsFile struct {
	// Note is for the reader of the file; nothing reads it.
	Note    string   `json:"note,omitempty"`
	Results []result `json:"results"`
}

// result is one line of a table of docs/performance.md: a figure of Hutch
// beside its peers or floor, and the ratios and targets that compare them,
// all measured in the same run.
type result struct {
	// ID names the line across runs ("a/create"): a new measurement
	// replaces the line with its ID.
	ID string `json:"id"`
	// Row is the bench's row that measures it, by letter; "" for a line
	// measured otherwise (Command says how).
	Row   string `json:"row,omitempty"`
	Topic string `json:"topic"` // the table, a heading of the page
	What  string `json:"what"`
	Hutch figure `json:"hutch"`
	// Peers are what Hutch is compared with: the tool a user would
	// otherwise reach for, or a floor no daemon can go below.
	Peers []figure `json:"peers,omitempty"`
	Ratio []term   `json:"ratio,omitempty"`
	// Command makes the line again (shown in backticks).
	Command string `json:"command"`
	// Host and Measured are where and when; a line without Measured is
	// one of the figures written by hand before the bench wrote the page.
	Host     hostInfo `json:"host"`
	Measured string   `json:"measured,omitempty"` // RFC 3339
}

// figure is one measured value. Text is what the page shows; Median and
// Unit are the same value for programs, when it is one median (a range of
// several runs, or a count of runs, has none).
type figure struct {
	Name   string   `json:"name,omitempty"` // a peer's; empty for Hutch's own
	Text   string   `json:"text,omitempty"`
	Median *float64 `json:"median,omitempty"`
	Unit   string   `json:"unit,omitempty"`
}

// term is one comparison in the ratio column: a ratio or a difference
// (Text, and Value when it is one number), a target, or both.
type term struct {
	Text   string   `json:"text,omitempty"`
	Value  *float64 `json:"value,omitempty"`
	Target *goal    `json:"target,omitempty"`
}

// goal is a target the docs set for a figure and whether it was met.
// Met is nil when one run does not say (a range of several runs across
// the target); Note explains a miss or says how often it was met.
type goal struct {
	Want string `json:"want"`
	Met  *bool  `json:"met,omitempty"`
	Note string `json:"note,omitempty"`
}

// durationFig is a duration as the page shows it, with its median in ms.
func durationFig(name string, d time.Duration) figure {
	return figure{Name: name, Text: fmtDuration(d), Median: ptr(rounded(float64(d)/float64(time.Millisecond), 3)), Unit: "ms"}
}

// deltaFig is a difference of two durations, signed.
func deltaFig(name string, d time.Duration) figure {
	f := durationFig(name, d)
	f.Text = fmtDelta(d)
	return f
}

// bytesFig is a memory figure in MiB.
func bytesFig(name string, b int64) figure {
	return figure{Name: name, Text: fmtBytes(b), Median: ptr(rounded(float64(b)/(1<<20), 3)), Unit: "MiB"}
}

// rateFig is a throughput in MB/s.
func rateFig(name string, mbps float64) figure {
	return figure{Name: name, Text: fmt.Sprintf("%.0f MB/s", mbps), Median: ptr(rounded(mbps, 1)), Unit: "MB/s"}
}

// ratioTerm is a ratio and what it is of ("1.28× `runc run`").
func ratioTerm(r float64, of string) term {
	t := term{Text: strings.TrimSpace(fmtRatio(r) + " " + of)}
	if !math.IsNaN(r) && !math.IsInf(r, 0) {
		t.Value = ptr(rounded(r, 3))
	}
	return t
}

// deltaTerm is a difference and what it is over ("+1.62 ms over a
// fork/exec").
func deltaTerm(d time.Duration, over string) term {
	return term{Text: strings.TrimSpace(fmtDelta(d) + " " + over), Value: ptr(rounded(float64(d)/float64(time.Millisecond), 3))}
}

// rounded is v to places decimals: the file records what was measured,
// not the float's noise.
func rounded(v float64, places int) float64 {
	p := math.Pow(10, float64(places))
	return math.Round(v*p) / p
}

// with adds a target to t.
func (t term) with(met bool, want string) term {
	t.Target = &goal{Want: want, Met: ptr(met)}
	return t
}

// targetTerm is a target alone, when the figure it is about is Hutch's own.
func targetTerm(met bool, want string) term { return term{}.with(met, want) }

func ptr[T any](v T) *T { return &v }

// stamp marks a run's results with what made them: the row, its command,
// the host and the time.
func stamp(rs []result, letter, command string, h hostInfo, at time.Time) []result {
	out := slices.Clone(rs)
	for i := range out {
		out[i].Row, out[i].Command, out[i].Host = letter, command, h
		out[i].Measured = at.UTC().Format(time.RFC3339)
	}
	return out
}

// merge puts the fresh results into old: a line with the same ID is
// replaced where it stands, a new one goes after the last line of its
// topic (or at the end, in a new table). Lines not measured again keep
// their last figures.
func merge(old, fresh []result) []result {
	out := slices.Clone(old)
	for _, r := range fresh {
		if i := slices.IndexFunc(out, func(o result) bool { return o.ID == r.ID }); i >= 0 {
			out[i] = r
			continue
		}
		at := len(out)
		for i, o := range out {
			if o.Topic == r.Topic {
				at = i + 1
			}
		}
		out = slices.Insert(out, at, r)
	}
	return out
}

// readResults reads a results file; a missing one is empty.
func readResults(path string) (resultsFile, error) {
	var f resultsFile
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return f, nil
	}
	if err != nil {
		return f, err
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return f, fmt.Errorf("read %s: %w", path, err)
	}
	return f, validate(f.Results)
}

// validate reports lines that the page could not show, or two of one ID.
func validate(rs []result) error {
	var errs []error
	seen := map[string]bool{}
	for i, r := range rs {
		switch {
		case r.ID == "":
			errs = append(errs, fmt.Errorf("result %d has no id", i))
		case seen[r.ID]:
			errs = append(errs, fmt.Errorf("result %s appears twice", r.ID))
		}
		seen[r.ID] = true
		if r.Topic == "" || r.What == "" || r.Hutch.Text == "" || r.Command == "" {
			errs = append(errs, fmt.Errorf("result %q lacks its topic, what, Hutch's figure or command", r.ID))
		}
	}
	return errors.Join(errs...)
}

// saveResults merges fresh into the results file at path, creating it if
// need be, and writes it back whole (a temporary file renamed over it).
func saveResults(path string, fresh []result) error {
	f, err := readResults(path)
	if err != nil {
		return err
	}
	f.Results = merge(f.Results, fresh)
	var data bytes.Buffer
	enc := json.NewEncoder(&data)
	enc.SetEscapeHTML(false) // "<" in a command stays readable
	enc.SetIndent("", "  ")
	if err := enc.Encode(f); err != nil {
		return err
	}
	return writeFile(path, data.Bytes())
}

// writeFile replaces path with data through a temporary file beside it, so
// that a reader never sees half of it.
func writeFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	err = errors.Join(err, tmp.Chmod(0o644), tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
	}
	return err
}
