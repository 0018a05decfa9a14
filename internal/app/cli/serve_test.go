package cli

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/hutchdev/hutch/internal/app/daemon"
)

// serveConfig is the configuration hutch serve hands the daemon for args.
func serveConfig(t *testing.T, args ...string) daemon.Config {
	t.Helper()
	var got daemon.Config
	cmd := serveCmd(func(_ context.Context, cfg daemon.Config, _ string, _ *slog.Logger) error {
		got = cfg
		return nil
	})
	cmd.SetArgs(args)
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	if err := cmd.ExecuteContext(t.Context()); err != nil {
		t.Fatalf("serve %v: %v", args, err)
	}
	return got
}

// --e2b-listen left out is not "" (no front) but the address derived from
// the data dir, which the daemon picks; given, in the file or as a flag,
// it is taken as it is, the flag over the file.
func TestServeE2BListen(t *testing.T) {
	dir := t.TempDir()
	file := func(body string) string {
		path := filepath.Join(t.TempDir(), "hutch.toml")
		if err := os.WriteFile(path, []byte("version = 1\n"+body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	tests := []struct {
		name string
		args []string
		want *string // nil: left to the daemon
	}{
		{"not given", []string{"--data-dir", dir}, nil},
		{"given", []string{"--data-dir", dir, "--e2b-listen", "127.0.0.1:49984"}, ptr("127.0.0.1:49984")},
		{"none", []string{"--data-dir", dir, "--e2b-listen", ""}, ptr("")},
		{"not in the file", []string{"--config", file("listen = \"127.0.0.1:9\"\n")}, nil},
		{"none in the file", []string{"--config", file("e2b_listen = \"\"\n")}, ptr("")},
		{"the flag over the file", []string{"--config", file("e2b_listen = \"\"\n"), "--e2b-listen", "127.0.0.1:49985"}, ptr("127.0.0.1:49985")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := serveConfig(t, tt.args...).E2BListen
			switch {
			case tt.want == nil && got != nil:
				t.Errorf("E2BListen = %q, want it unset", *got)
			case tt.want != nil && (got == nil || *got != *tt.want):
				t.Errorf("E2BListen = %v, want %q", got, *tt.want)
			}
		})
	}
}

func ptr(s string) *string { return &s }

// Go's flag packages take a back-quoted word in a flag's usage as the
// name of its argument: `hutch e2b env` in --e2b-listen's printed
// "--e2b-listen hutch e2b env". Every back-quoted word in hutch's flags
// must read as a placeholder: letters and the punctuation of a pattern
// (K=V, NAME[:PATH[:ro|rw]]), no spaces, no example value such as a
// domain.
func TestFlagArgumentNames(t *testing.T) {
	a := &app{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard}
	var walk func(cmd *cobra.Command)
	walk = func(cmd *cobra.Command) {
		check := func(f *pflag.Flag) {
			if !strings.Contains(f.Usage, "`") {
				return
			}
			name, _ := pflag.UnquoteUsage(f)
			if !placeholder.MatchString(name) {
				t.Errorf("%s --%s: its usage makes %q the argument's name: back-quote a placeholder such as ADDR, or nothing", cmd.CommandPath(), f.Name, name)
			}
		}
		cmd.LocalFlags().VisitAll(check)
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	walk(a.newRootCmd())

	var help strings.Builder
	serve := newServeCmd()
	serve.SetOut(&help)
	serve.SetArgs([]string{"--help"})
	if err := serve.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(help.String(), "--e2b-listen ADDR ") || strings.Contains(help.String(), "`") {
		t.Errorf("hutch serve --help:\n%s\nwant --e2b-listen ADDR, and no back quote", help.String())
	}
}

var placeholder = regexp.MustCompile(`^[A-Za-z_=:@|\[\]]+$`)
