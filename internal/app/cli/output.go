package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// jsonOutput reports whether --output json was asked for.
func (a *app) jsonOutput() bool { return a.output == "json" }

// printJSON writes v as indented JSON.
func (a *app) printJSON(v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(a.stdout, "%s\n", b)
	return err
}

// table writes aligned columns: header first, then rows, flushed by flush.
type table struct {
	tw *tabwriter.Writer
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)}
	t.row(header...)
	return t
}

func (t *table) row(cols ...string) {
	_, _ = fmt.Fprintln(t.tw, strings.Join(cols, "\t")) // errors surface at flush
}

func (t *table) flush() error { return t.tw.Flush() }

// age renders how long ago t was, coarsely: "45s", "12m", "3h", "5d".
func age(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(0, int(d/time.Second)))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	default:
		return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
	}
}

// seconds converts a flag's duration to whole seconds for the API, rounding a
// fraction up so a short positive duration does not become "the default".
func seconds(d time.Duration) int64 {
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

// printf writes a message for the user to stderr.
func (a *app) printf(format string, args ...any) {
	_, _ = fmt.Fprintf(a.stderr, format, args...)
}
