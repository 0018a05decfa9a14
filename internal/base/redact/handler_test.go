package redact

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

const logSecret = "hunter2-hunter2"

// token is a fmt.Stringer that shows its secret.
type token struct{ v string }

func (t token) String() string { return "token " + t.v }

// credentials shows its secret in JSON but not in fmt's form (a pointer).
type credentials struct {
	User string
	Pass *string
}

// lazySecret resolves to the secret through slog.LogValuer.
type lazySecret struct{}

func (lazySecret) LogValue() slog.Value { return slog.StringValue(logSecret) }

// newTestLogger returns a JSON logger through NewHandler and its output.
func newTestLogger(r *Redactor) (*slog.Logger, *bytes.Buffer) {
	var buf bytes.Buffer
	next := slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})
	return slog.New(NewHandler(next, r)), &buf
}

func TestHandlerRedacts(t *testing.T) {
	t.Parallel()
	pass := logSecret
	tests := []struct {
		name string
		log  func(*slog.Logger)
		want string // a fragment the JSON line must contain
	}{
		{"message", func(l *slog.Logger) { l.Info("key is " + logSecret) },
			`"msg":"key is [redacted:pw]"`},
		{"string attr", func(l *slog.Logger) { l.Info("m", "k", logSecret) },
			`"k":"[redacted:pw]"`},
		{"error attr", func(l *slog.Logger) { l.Info("m", "err", fmt.Errorf("login %s: %w", logSecret, errors.New("denied"))) },
			`"err":"login [redacted:pw]: denied"`},
		{"stringer attr", func(l *slog.Logger) { l.Info("m", "t", token{logSecret}) },
			`"t":"token [redacted:pw]"`},
		{"struct attr rendered as text", func(l *slog.Logger) { l.Info("m", "c", credentials{User: "ada", Pass: &pass}) },
			`"c":"{User:ada Pass:`},
		{"bytes attr", func(l *slog.Logger) { l.Info("m", "b", []byte("x"+logSecret)) },
			`"b":"x[redacted:pw]"`},
		{"base64 in attr", func(l *slog.Logger) { l.Info("m", "auth", "Basic aHVudGVyMi1odW50ZXIy") },
			`"auth":"Basic [redacted:pw]"`},
		{"log valuer", func(l *slog.Logger) { l.Info("m", "lazy", lazySecret{}) },
			`"lazy":"[redacted:pw]"`},
		{"grouped attr", func(l *slog.Logger) { l.Info("m", slog.Group("g", "k", logSecret)) },
			`"g":{"k":"[redacted:pw]"}`},
		{"key", func(l *slog.Logger) { l.Info("m", logSecret, 1) },
			`"[redacted:pw]":1`},
		{"number whose text is a secret", func(l *slog.Logger) { l.Info("m", "n", 12345678901) },
			`"n":"[redacted:num]"`},
		{"other number unchanged", func(l *slog.Logger) { l.Info("m", "n", 42) },
			`"n":42`},
		{"WithAttrs attr", func(l *slog.Logger) { l.With("k", logSecret).Info("m") },
			`"k":"[redacted:pw]"`},
		{"WithGroup then WithAttrs", func(l *slog.Logger) { l.WithGroup("g").With("k", logSecret).Info("m", "x", 1) },
			`"g":{"k":"[redacted:pw]","x":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var r Redactor
			r.Replace([]Secret{{Name: "pw", Value: logSecret}, {Name: "num", Value: "12345678901"}})
			l, buf := newTestLogger(&r)
			tt.log(l)
			out := buf.String()
			if !strings.Contains(out, tt.want) {
				t.Errorf("log line %s does not contain %s", out, tt.want)
			}
			if strings.Contains(out, logSecret) {
				t.Errorf("log line %s contains the secret", out)
			}
		})
	}
}

func TestHandlerRedactsWithAttrsAddedBeforeSecret(t *testing.T) {
	t.Parallel()
	var r Redactor
	l, buf := newTestLogger(&r)
	l = l.With("k", logSecret)
	r.Replace([]Secret{{Name: "pw", Value: logSecret}})
	l.Info("m")
	if out := buf.String(); strings.Contains(out, logSecret) || !strings.Contains(out, `"k":"[redacted:pw]"`) {
		t.Errorf("log line %s: want k redacted with the set replaced after With", out)
	}
}

func TestHandlerEnabledAndGroups(t *testing.T) {
	t.Parallel()
	var r Redactor
	l, buf := newTestLogger(&r)
	ctx := context.Background()
	if l.Enabled(ctx, slog.LevelDebug) {
		t.Error("Debug enabled, want it filtered as the next handler does")
	}
	if !l.Enabled(ctx, slog.LevelWarn) {
		t.Error("Warn disabled, want it enabled")
	}
	l.Debug("hidden")
	l.WithGroup("").Info("m", "k", "v") // an empty group is no group
	if out := buf.String(); strings.Contains(out, "hidden") || !strings.Contains(out, `"k":"v"`) {
		t.Errorf("log output %s", out)
	}
}

func TestHandlerNilRedactorAndNext(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	l := slog.New(NewHandler(slog.NewTextHandler(&buf, nil), nil))
	l.Info("plain", "k", "v")
	if !strings.Contains(buf.String(), "msg=plain k=v") {
		t.Errorf("log output %q", buf.String())
	}
	slog.New(NewHandler(nil, nil)).Info("discarded") // must not panic
}
