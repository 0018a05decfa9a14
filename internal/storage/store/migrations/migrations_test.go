package migrations

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// Every version is written for every dialect, under one name.
func TestEveryDialect(t *testing.T) {
	var counts []int
	for _, d := range dialects {
		ms, err := For(d)
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range ms {
			if m.Version != i+1 || strings.TrimSpace(m.SQL) == "" || !strings.HasSuffix(m.Name, "."+string(d)+".sql") {
				t.Errorf("%s: migration %d is %+v", d, i+1, m)
			}
		}
		counts = append(counts, len(ms))
	}
	if counts[0] == 0 || counts[0] != counts[1] {
		t.Errorf("migrations by dialect: %v", counts)
	}
	if _, err := For("mysql"); err == nil {
		t.Error("For of an unknown dialect: no error")
	}
}

// fakeTarget records what it applies.
type fakeTarget struct {
	version int
	applied []int
	failAt  int
}

func (f *fakeTarget) Version(context.Context) (int, error) { return f.version, nil }

func (f *fakeTarget) Apply(_ context.Context, m Migration) error {
	if m.Version == f.failAt {
		return errors.New("syntax error")
	}
	f.applied = append(f.applied, m.Version)
	f.version = m.Version
	return nil
}

func TestRun(t *testing.T) {
	all, err := For(SQLite)
	if err != nil {
		t.Fatal(err)
	}
	n := len(all)
	tests := []struct {
		name        string
		from        int
		failAt      int
		wantApplied int    // the first applied; n+1: none
		wantErr     string // "" for none
	}{
		{"a new database", 0, 0, 1, ""},
		{"an older one", n - 2, 0, n - 1, ""},
		{"an up-to-date one", n, 0, n + 1, ""},
		{"a newer one", n + 1, 0, n + 1, "newer than this binary's"},
		{"a migration that fails", 0, 2, 1, all[1].Name + ": syntax error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeTarget{version: tt.from, failAt: tt.failAt}
			err := Run(t.Context(), SQLite, f)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Run: %v, want %q", err, tt.wantErr)
			}
			if tt.wantApplied <= n && (len(f.applied) == 0 || f.applied[0] != tt.wantApplied) {
				t.Errorf("applied %v, want from %d", f.applied, tt.wantApplied)
			}
			if tt.wantApplied > n && len(f.applied) != 0 {
				t.Errorf("applied %v, want none", f.applied)
			}
			if tt.wantErr == "" && f.version != max(n, tt.from) {
				t.Errorf("at version %d after Run, want %d", f.version, n)
			}
			if tt.failAt != 0 && f.version != tt.failAt-1 {
				t.Errorf("at version %d after a failure at %d", f.version, tt.failAt)
			}
		})
	}
}
