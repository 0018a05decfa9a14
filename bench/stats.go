package main

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// number is what the statistics below work on: durations and byte counts.
type number interface{ ~int64 | ~float64 }

// median is the middle value of v (the mean of the two middle ones for an
// even count); zero for no values.
func median[T number](v []T) T {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	mid := len(s) / 2
	if len(s)%2 == 1 {
		return s[mid]
	}
	return (s[mid-1] + s[mid]) / 2
}

// differences are a[i] − b[i]: samples of two peers taken in the same
// rounds of interleave, paired by round, so that the host's drift from
// round to round cancels out of each.
func differences(a, b []time.Duration) []time.Duration {
	d := make([]time.Duration, min(len(a), len(b)))
	for i := range d {
		d[i] = a[i] - b[i]
	}
	return d
}

// p90 is the 90th percentile of v by the nearest-rank method: the smallest
// value that at least 90% of the values are no greater than.
func p90[T number](v []T) T { return percentile(v, 0.9) }

// percentile is the q-th quantile of v (0 < q ≤ 1) by the nearest-rank
// method.
func percentile[T number](v []T, q float64) T {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	rank := int(math.Ceil(q * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}

// ratio is a/b, or NaN when b is zero.
func ratio[T number](a, b T) float64 {
	if b == 0 {
		return math.NaN()
	}
	return float64(a) / float64(b)
}

func fmtDuration(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	switch {
	case ms < 10: // and negative differences
		return fmt.Sprintf("%.2f ms", ms)
	case ms < 1000:
		return fmt.Sprintf("%.1f ms", ms)
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

func fmtBytes(b int64) string {
	return fmt.Sprintf("%.2f MiB", float64(b)/(1<<20))
}

func fmtRatio(r float64) string {
	if math.IsNaN(r) {
		return "n/a"
	}
	return fmt.Sprintf("%.2f×", r)
}

// fmtDelta is a signed difference of durations, "+0.42 ms" or "−8.40 ms".
func fmtDelta(d time.Duration) string {
	if d < 0 {
		return "−" + fmtDuration(-d)
	}
	return "+" + fmtDuration(d)
}

// fmtCount is a count with thousands separated, "1,894".
func fmtCount(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		return "-" + s
	}
	return s
}
