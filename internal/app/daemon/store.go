package daemon

import (
	"context"

	"github.com/hutchdev/hutch/internal/storage/store"
	"github.com/hutchdev/hutch/internal/storage/store/postgres"
	"github.com/hutchdev/hutch/internal/storage/store/sqlite"
)

// database is where the daemon keeps its state: the Store, and the
// vault's secrets.
type database interface {
	store.Store
	store.Secrets
}

// openStore opens the database cfg names: PostgreSQL when it gives a URL
// (Validate checked it), else SQLite in the data dir.
func openStore(ctx context.Context, cfg Config) (database, error) {
	if cfg.Store != "" {
		db, err := postgres.Open(ctx, cfg.Store)
		if err != nil {
			return nil, err
		}
		return db, nil
	}
	db, err := sqlite.Open(ctx, cfg.dbPath())
	if err != nil {
		return nil, err
	}
	return db, nil
}
