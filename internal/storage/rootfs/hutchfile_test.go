package rootfs

import (
	"errors"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/internal/base/errdefs"
)

func TestParseHutchfile(t *testing.T) {
	hf, err := ParseHutchfile(`# a comment
FROM base

ENV A=1 B="two"
env C three words
WORKDIR /opt/app
COPY a.txt dir/ /opt/app/
RUN apt-get update && \
    apt-get install -y jq
RUN ["/bin/echo", "exec form"]
USER user
`)
	if err != nil {
		t.Fatal(err)
	}
	if hf.From != "base" || len(hf.Steps) != 7 {
		t.Fatalf("parsed %+v", hf)
	}
	want := []struct {
		op   string
		args string
		line int
	}{
		{"ENV", "A=1 B=two", 4},
		{"ENV", "C=three words", 5},
		{"WORKDIR", "/opt/app", 6},
		{"COPY", "a.txt dir/ /opt/app/", 7},
		{"RUN", "apt-get update && apt-get install -y jq", 8},
		{"RUN", "/bin/echo exec form", 10},
		{"USER", "user", 11},
	}
	for i, w := range want {
		got := hf.Steps[i]
		if got.Op != w.op || strings.Join(got.Args, " ") != w.args || got.Line != w.line {
			t.Errorf("step %d = %s %q (line %d), want %s %q (line %d)", i, got.Op, got.Args, got.Line, w.op, w.args, w.line)
		}
	}
	if !hf.Steps[5].Exec || hf.Steps[4].Exec {
		t.Errorf("exec forms: %v %v", hf.Steps[4].Exec, hf.Steps[5].Exec)
	}
}

func TestParseHutchfileErrors(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"", "starts with FROM"},
		{"RUN true", "line 1: a Hutchfile starts with FROM"},
		{"FROM base\nFROM other", "line 2"},
		{"FROM Bad Name", "line 1: FROM takes a template's name"},
		{"FROM base\nRUN", "line 2: RUN needs a command"},
		{"FROM base\nRUN [\"unclosed\"", "JSON array"},
		{"FROM base\nCOPY onlyone", "COPY needs one or more sources"},
		{"FROM base\nCOPY --chown=user a b", "COPY takes no options"},
		{"FROM base\nENV 1BAD=x", "NAME=value"},
		{"FROM base\nWORKDIR a b", "WORKDIR takes one word"},
		{"FROM base\nEXPOSE 80", `line 2: unknown instruction "EXPOSE"`},
	} {
		_, err := ParseHutchfile(tc.text)
		if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseHutchfile(%q) = %v, want an invalid argument saying %q", tc.text, err, tc.want)
		}
	}
}
