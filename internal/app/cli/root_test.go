package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
)

func TestUsageAndErrors(t *testing.T) {
	f := newFakeDaemon(t)
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  []string
		wantOut  string
	}{
		{"no command prints help", nil, 0, nil, "Usage:"},
		{"help", []string{"--help"}, 0, nil, "Available Commands:"},
		{"unknown command", []string{"inspec"}, 2, []string{`hutch: unknown command "inspec" for "hutch"; did you mean inspect?`, "Run 'hutch --help' for usage."}, ""},
		{"unknown fs command", []string{"fs", "cta"}, 2, []string{`unknown command "cta" for "hutch fs"`}, ""},
		{"unknown flag", []string{"ls", "--bogus"}, 2, []string{"unknown flag: --bogus", "Run 'hutch ls --help'"}, ""},
		{"bad output", []string{"ls", "-o", "yaml"}, 2, []string{"--output must be table or json"}, ""},
		{"api error", []string{"inspect", "x"}, 1, []string{"hutch: sandbox x not found\n"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.run(t.Context(), "", tt.args...)
			if r.code != tt.wantCode {
				t.Fatalf("exit %d, want %d; stderr %q", r.code, tt.wantCode, r.stderr)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr %q lacks %q", r.stderr, w)
				}
			}
			if !strings.Contains(r.stdout, tt.wantOut) {
				t.Errorf("stdout %q lacks %q", r.stdout, tt.wantOut)
			}
		})
	}
}

// TestHints checks the hints printed with errors whose fix is known.
func TestHints(t *testing.T) {
	f := newFakeDaemon(t)
	closed := newFakeDaemon(t)
	closed.srv.Close()
	tests := []struct {
		name    string
		url     string
		key     string
		wantErr []string
	}{
		{"daemon down", closed.srv.URL, fakeKey, []string{"connection refused", "is the daemon running? start it with: hutch serve"}},
		{"wrong key", f.srv.URL, "wrong", []string{"hutch: missing or wrong API key\n", "set HUTCH_API_KEY"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			a := &app{
				stdin: strings.NewReader(""), stdout: &out, stderr: &errOut,
				lookupEnv: func(string) (string, bool) { return "", false },
				newClient: func() (*client.Client, error) { return client.New(tt.url, tt.key) },
				now:       time.Now,
			}
			if code := a.run(t.Context(), []string{"ls"}); code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(errOut.String(), w) {
					t.Errorf("stderr %q lacks %q", errOut.String(), w)
				}
			}
		})
	}
}

func TestAge(t *testing.T) {
	now := fakeNow
	tests := []struct {
		ago  time.Duration
		want string
	}{
		{-time.Second, "0s"}, {0, "0s"}, {59 * time.Second, "59s"}, {time.Minute, "1m"},
		{59 * time.Minute, "59m"}, {time.Hour, "1h"}, {47 * time.Hour, "47h"}, {48 * time.Hour, "2d"},
	}
	for _, tt := range tests {
		if got := age(now, now.Add(-tt.ago)); got != tt.want {
			t.Errorf("age(%v) = %q, want %q", tt.ago, got, tt.want)
		}
	}
	if got := age(now, time.Time{}); got != "-" {
		t.Errorf("age(zero) = %q", got)
	}
}

// `hutch agent` is parsed before the command tree; its mistakes are usage
// errors all the same.
func TestAgentUsage(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"neither socket nor descriptor", []string{"agent"}, 2, "give either --socket PATH or --listen-fd N"},
		{"both", []string{"agent", "--socket", "/x", "--listen-fd", "3"}, 2, "give either"},
		{"stdio is not for listening", []string{"agent", "--listen-fd", "1"}, 2, "N ≥ 3"},
		{"an argument", []string{"agent", "--socket", "/x", "extra"}, 2, "no arguments"},
		{"unknown flag", []string{"agent", "--bogus"}, 2, "flag provided but not defined: -bogus"},
		{"a descriptor that is not open", []string{"agent", "--listen-fd", "999"}, 1, "descriptor 999 is not a listening socket"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Main(t.Context(), tt.args, &stdout, &stderr)
			if code != tt.wantCode || !strings.Contains(stderr.String(), tt.wantErr) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, stderr.String(), tt.wantCode, tt.wantErr)
			}
		})
	}
}
