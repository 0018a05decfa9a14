package logring

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/hutchdev/hutch/internal/base/redact"
)

// Warnings and errors are kept, with their attributes as text; records
// below MinLevel are not, and every record still reaches the handler
// wrapped, at its own level.
func TestKeepsWarnAndAbove(t *testing.T) {
	t.Parallel()
	r := New(10)
	var out bytes.Buffer
	log := slog.New(r.Handler(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug})))
	log.Debug("debug line")
	log.Info("info line", "n", 1)
	log.Warn("warn line", "backend", "gvisor", "error", fmt.Errorf("runsc not found"))
	log.Error("error line", slog.Int("code", 7))

	got := r.Records()
	if len(got) != 2 {
		t.Fatalf("kept %d records, want 2: %+v", len(got), got)
	}
	if got[0].Level != slog.LevelWarn || got[0].Message != "warn line" ||
		got[0].Attrs["backend"] != "gvisor" || got[0].Attrs["error"] != "runsc not found" {
		t.Errorf("first: %+v", got[0])
	}
	if got[1].Level != slog.LevelError || got[1].Message != "error line" || got[1].Attrs["code"] != "7" || got[1].Time.IsZero() {
		t.Errorf("second: %+v", got[1])
	}
	for _, line := range []string{"debug line", "info line", "warn line", "error line"} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("%q did not reach the wrapped handler:\n%s", line, out.String())
		}
	}
}

// A daemon logging at error only still has its warnings kept, and the
// handler it wraps is given none of them.
func TestKeepsWarningsTheWrappedHandlerDrops(t *testing.T) {
	t.Parallel()
	r := New(10)
	var out bytes.Buffer
	log := slog.New(r.Handler(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelError})))
	log.Info("info line")
	log.Warn("warn line")
	if got := r.Records(); len(got) != 1 || got[0].Message != "warn line" {
		t.Errorf("kept %+v, want the warning", got)
	}
	if out.Len() != 0 {
		t.Errorf("the wrapped handler wrote %q, which its level drops", out.String())
	}
}

// The ring holds the last records only, oldest first and newest last.
func TestBounded(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		size   int
		logged int
		want   []int // the records' n, in order
	}{
		{"empty", 3, 0, []int{}},
		{"not full", 3, 2, []int{0, 1}},
		{"full", 3, 3, []int{0, 1, 2}},
		{"wrapped once", 3, 4, []int{1, 2, 3}},
		{"wrapped many times", 3, 11, []int{8, 9, 10}},
		{"size below one keeps one", 0, 5, []int{4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := New(tt.size)
			log := slog.New(r.Handler(nil))
			for i := range tt.logged {
				log.Warn("w", "n", i)
			}
			got := r.Records()
			var ns []string
			for _, rec := range got {
				ns = append(ns, rec.Attrs["n"])
			}
			want := make([]string, len(tt.want))
			for i, n := range tt.want {
				want[i] = fmt.Sprint(n)
			}
			if strings.Join(ns, ",") != strings.Join(want, ",") {
				t.Errorf("kept n=%v, want %v", ns, want)
			}
		})
	}
}

// Attributes given through With, and groups, are flattened to dotted
// keys as a text handler writes them; an empty attribute is dropped and
// a group with no key inlined.
func TestAttributesFlattened(t *testing.T) {
	t.Parallel()
	r := New(5)
	log := slog.New(r.Handler(nil)).With("sandbox_id", "s1").WithGroup("req").With("method", "GET")
	log.Warn("slow", slog.Group("timing", slog.Int("ms", 1200)), slog.Attr{}, slog.Group("", slog.String("inline", "yes")))
	// Derived loggers do not share what they were given.
	slog.New(r.Handler(nil)).With("other", "x").Warn("apart")

	got := r.Records()
	want := map[string]string{"sandbox_id": "s1", "req.method": "GET", "req.timing.ms": "1200", "req.inline": "yes"}
	if fmt.Sprint(got[0].Attrs) != fmt.Sprint(want) {
		t.Errorf("attributes %v, want %v", got[0].Attrs, want)
	}
	if fmt.Sprint(got[1].Attrs) != fmt.Sprint(map[string]string{"other": "x"}) {
		t.Errorf("attributes of another logger: %v", got[1].Attrs)
	}
}

// A long message or value is cut, so that the ring stays small.
func TestLongTextClipped(t *testing.T) {
	t.Parallel()
	r := New(1)
	long := strings.Repeat("é", maxText) // two bytes each
	slog.New(r.Handler(nil)).Error(long, "output", long)
	rec := r.Records()[0]
	for what, s := range map[string]string{"message": rec.Message, "value": rec.Attrs["output"]} {
		if len(s) > maxText+len("…") || !strings.HasSuffix(s, "…") || !strings.HasPrefix(s, "éé") || strings.ContainsRune(s, '\uFFFD') {
			t.Errorf("%s of %d bytes not clipped cleanly: %d bytes", what, len(long), len(s))
		}
	}
}

// Many goroutines logging and reading at once (run with -race): the ring
// stays bounded and every record it holds is whole.
func TestConcurrent(t *testing.T) {
	t.Parallel()
	const size, writers, each = 50, 8, 500
	r := New(size)
	log := slog.New(r.Handler(nil))
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			l := log.With("writer", w)
			for i := range each {
				l.Warn("w", "i", i)
			}
		})
	}
	wg.Go(func() {
		for range each {
			if n := len(r.Records()); n > size {
				t.Errorf("%d records kept, bound %d", n, size)
				return
			}
		}
	})
	wg.Wait()
	got := r.Records()
	if len(got) != size {
		t.Fatalf("%d records kept, want %d", len(got), size)
	}
	for _, rec := range got {
		if rec.Message != "w" || rec.Attrs["writer"] == "" || rec.Attrs["i"] == "" {
			t.Fatalf("a torn record: %+v", rec)
		}
	}
}

// Records returns a copy: what a caller does with it does not touch the
// ring.
func TestRecordsIsACopy(t *testing.T) {
	t.Parallel()
	r := New(2)
	slog.New(r.Handler(nil)).Warn("kept", "k", "v")
	got := r.Records()
	got[0].Message = "changed"
	got[0].Attrs["k"] = "changed"
	if again := r.Records()[0]; again.Message != "kept" || again.Attrs["k"] != "v" {
		t.Errorf("the ring's record changed to %+v", again)
	}
}

// Behind the redacting handler, as the daemon wires it, the ring keeps no
// secret value: not in the message, an attribute, or one given through
// With before the secret was known.
func TestBehindRedaction(t *testing.T) {
	t.Parallel()
	const value = "s3cr3t-value-123"
	r := New(5)
	redactor := &redact.Redactor{}
	log := slog.New(redact.NewHandler(r.Handler(nil), redactor))
	early := log.With("token", value)
	redactor.Replace([]redact.Secret{{Name: "TOKEN", Value: value}})
	log.Warn("pushed with "+value, "header", "Bearer "+value, "error", fmt.Errorf("refused %s", value))
	early.Error("early")
	got := r.Records()
	if len(got) != 2 {
		t.Fatalf("kept %d records, want 2", len(got))
	}
	for _, rec := range got {
		if text := fmt.Sprint(rec); strings.Contains(text, value) || !strings.Contains(text, "[redacted:TOKEN]") {
			t.Errorf("kept %s", text)
		}
	}
}
