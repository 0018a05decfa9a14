package main

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMarksUpTo(t *testing.T) {
	tests := []struct {
		name string
		n    int
		want []int
	}{
		{"the full count", 1000, []int{10, 100, 250, 500, 750, 1000}},
		{"between marks", 300, []int{10, 100, 250, 300}},
		{"a small run", 30, []int{10, 30}},
		{"below the first mark", 5, []int{5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := marksUpTo(densityMarks["runc"], tt.n); !slices.Equal(got, tt.want) {
				t.Errorf("marksUpTo(%d) = %v, want %v", tt.n, got, tt.want)
			}
		})
	}
}

func TestDensityRows(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	marks := []densityMark{
		{count: 10, creates: ms(100, 100, 100), perSandbox: 5 << 20, daemonRSS: 40 << 20, floor: ms(80, 80, 80)},
		{count: 300, creates: ms(120, 120, 120), perSandbox: 6 << 20, daemonRSS: 60 << 20, floor: ms(88, 88, 88)},
	}
	rows, results := densityRows("gvisor", marks, 300, 300)
	var ratioRow, floorRow row
	for _, r := range rows {
		switch {
		case strings.Contains(r.label, "ratio create"):
			ratioRow = r
		case strings.Contains(r.label, "ratio runsc run"):
			floorRow = r
		}
	}
	if ratioRow.median != "1.20×" || ratioRow.target != "MISS  ≤ 1.1× create at 10" {
		t.Errorf("the ratio row is %+v", ratioRow)
	}
	if floorRow.median != "1.10×" {
		t.Errorf("the floor's ratio row is %+v", floorRow)
	}
	if last := rows[len(rows)-1]; last.median != "300 of 300" {
		t.Errorf("the last row is %+v, want 300 of 300 answering", last)
	}
	if len(results) != 1 {
		t.Fatalf("%d results, want 1", len(results))
	}
	r := results[0]
	if r.ID != "q/gvisor" || r.Topic != topicMemory || !strings.Contains(r.What, "300 idle sandboxes, gVisor") {
		t.Errorf("the result is %+v", r)
	}
	if !strings.HasPrefix(r.Hutch.Text, "120.0 ms (host memory per sandbox 6.00 MiB") {
		t.Errorf("Hutch's figure is %q", r.Hutch.Text)
	}
	if got := ratioCell(r.Ratio); got != "1.20× create at 10 (target ≤ 1.1×: missed); 1.10× runsc run's own growth" {
		t.Errorf("the ratio cell is %q", got)
	}
	if err := validate(stamp(results, "q", "go run ./bench -hutch bin/hutch -rows q", testHost, time.Now())); err != nil {
		t.Error(err)
	}
}
