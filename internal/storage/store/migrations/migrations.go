// Package migrations holds the schema of every store, as numbered
// migrations side by side: NNNN_name.sqlite.sql and NNNN_name.postgres.sql
// make one change, in each database's own dialect. One version is one
// change on both, so that a schema change is written (and reviewed) for
// both at once, and a version number means the same schema whichever the
// store; a test refuses a migration written for one alone.
//
// Run applies what a database lacks, in order. Where a database records
// the versions it has is its store's (SQLite's user_version, which
// databases made before this package already hold; a table in
// PostgreSQL), behind Target.
package migrations

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"strconv"
	"strings"
)

//go:embed *.sql
var files embed.FS

// Dialect is a database's SQL dialect: the middle of its files' names.
type Dialect string

const (
	SQLite   Dialect = "sqlite"
	Postgres Dialect = "postgres"
)

// dialects are every dialect a migration must be written in.
var dialects = []Dialect{SQLite, Postgres}

// Migration is one change of the schema in one dialect.
type Migration struct {
	Version int    // from 1, without gaps
	Name    string // the file's name
	SQL     string // one or more statements
}

// Target is a database being migrated.
type Target interface {
	// Version is the version of the last migration applied; 0 if none.
	Version(ctx context.Context) (int, error)
	// Apply runs m and records its version, both or neither.
	Apply(ctx context.Context, m Migration) error
}

// Run applies to t, in order, every migration of d newer than its version.
// A database newer than this binary's migrations is an error: this binary
// would not know its schema.
func Run(ctx context.Context, d Dialect, t Target) error {
	all, err := For(d)
	if err != nil {
		return err
	}
	current, err := t.Version(ctx)
	if err != nil {
		return fmt.Errorf("read the schema's version: %w", err)
	}
	if current > len(all) {
		return fmt.Errorf("database schema version %d is newer than this binary's %d", current, len(all))
	}
	for _, m := range all[current:] {
		if err := t.Apply(ctx, m); err != nil {
			return fmt.Errorf("%s: %w", m.Name, err)
		}
	}
	return nil
}

// For returns d's migrations in order. It fails if a version lacks its file
// in any dialect, or versions skip a number.
func For(d Dialect) ([]Migration, error) {
	byDialect, err := load()
	if err != nil {
		return nil, err
	}
	ms, ok := byDialect[d]
	if !ok {
		return nil, fmt.Errorf("no migrations for dialect %q", d)
	}
	return ms, nil
}

// load reads every migration, by dialect, checking that they pair up.
func load() (map[Dialect][]Migration, error) {
	names, err := fs.Glob(files, "*.sql")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	out := map[Dialect][]Migration{}
	for _, name := range names {
		// NNNN_what.dialect.sql
		base := strings.TrimSuffix(name, ".sql")
		dot := strings.LastIndexByte(base, '.')
		underscore := strings.IndexByte(base, '_')
		if dot < 0 || underscore < 0 || underscore > dot {
			return nil, fmt.Errorf("migration %s: name it NNNN_what.dialect.sql", name)
		}
		version, err := strconv.Atoi(base[:underscore])
		if err != nil {
			return nil, fmt.Errorf("migration %s: name it NNNN_what.dialect.sql", name)
		}
		d := Dialect(base[dot+1:])
		if want := len(out[d]) + 1; version != want {
			return nil, fmt.Errorf("migration %s: version %d, want %d (one file a version and dialect, no gaps)", name, version, want)
		}
		body, err := files.ReadFile(name)
		if err != nil {
			return nil, err
		}
		out[d] = append(out[d], Migration{Version: version, Name: name, SQL: string(body)})
	}
	for _, d := range dialects {
		if len(out[d]) != len(out[dialects[0]]) {
			return nil, fmt.Errorf("migrations: %d for %s but %d for %s: write each for both", len(out[d]), d, len(out[dialects[0]]), dialects[0])
		}
	}
	for d := range out {
		if !slices.Contains(dialects, d) {
			return nil, fmt.Errorf("migrations: unknown dialect %q (%s)", d, out[d][0].Name)
		}
	}
	for i, m := range out[dialects[0]] {
		for _, d := range dialects[1:] {
			if other := out[d][i]; stem(other.Name) != stem(m.Name) {
				return nil, fmt.Errorf("migration %d is %s in %s but %s in %s", m.Version, m.Name, dialects[0], other.Name, d)
			}
		}
	}
	return out, nil
}

// stem is a migration's name without its dialect: 0001_sandboxes.
func stem(name string) string {
	base := strings.TrimSuffix(name, ".sql")
	return base[:strings.LastIndexByte(base, '.')]
}
