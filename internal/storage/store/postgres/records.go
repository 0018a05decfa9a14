package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/storage/store"
	"github.com/hutchdev/hutch/internal/storage/store/sqlrows"
)

// PutProcess inserts or replaces a sandbox's background process, keeping
// the later of its links' revocations (GREATEST skips NULL).
func (d *DB) PutProcess(ctx context.Context, p *store.Process) error {
	args, err := sqlrows.ProcessArgs(p)
	if err != nil {
		return err
	}
	_, err = d.pool.Exec(ctx, `INSERT INTO processes (`+sqlrows.ProcessColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
		ON CONFLICT (sandbox_id, name) DO UPDATE SET
			argv = excluded.argv, cwd = excluded.cwd, "user" = excluded."user", env = excluded.env,
			port = excluded.port, running = excluded.running, created_at = excluded.created_at,
			for_user = excluded.for_user, stdin = excluded.stdin, public = excluded.public, slot = excluded.slot,
			links_revoked_at = GREATEST(processes.links_revoked_at, excluded.links_revoked_at)`, args...)
	if _, ok := violated(err, foreignKeyViolation); ok {
		return errdefs.NotFound("sandbox %s not found", p.SandboxID)
	}
	if err != nil {
		return fmt.Errorf("put process %s of sandbox %s: %w", p.Name, p.SandboxID, err)
	}
	return nil
}

// ListProcesses returns a sandbox's background processes, oldest first.
func (d *DB) ListProcesses(ctx context.Context, sandboxID string) ([]*store.Process, error) {
	out, err := query(ctx, d, sqlrows.ScanProcess, `SELECT `+sqlrows.ProcessColumns+`
		FROM processes WHERE sandbox_id = $1 ORDER BY created_at, name`, sandboxID)
	if err != nil {
		return nil, fmt.Errorf("list processes of sandbox %s: %w", sandboxID, err)
	}
	return out, nil
}

// DeleteProcess removes a sandbox's background process.
func (d *DB) DeleteProcess(ctx context.Context, sandboxID, name string) error {
	tag, err := d.pool.Exec(ctx, `DELETE FROM processes WHERE sandbox_id = $1 AND name = $2`, sandboxID, name)
	if err != nil {
		return fmt.Errorf("delete process %s of sandbox %s: %w", name, sandboxID, err)
	}
	return expectOne(tag, "sandbox %s has no process %q", sandboxID, name)
}

// SetLinksRevoked sets when a process's preview links were revoked,
// unless that is later already.
func (d *DB) SetLinksRevoked(ctx context.Context, sandboxID, name string, at time.Time) error {
	tag, err := d.pool.Exec(ctx, `UPDATE processes SET links_revoked_at = GREATEST(links_revoked_at, $1)
		WHERE sandbox_id = $2 AND name = $3`, at.UnixNano(), sandboxID, name)
	if err != nil {
		return fmt.Errorf("revoke links of process %s of sandbox %s: %w", name, sandboxID, err)
	}
	return expectOne(tag, "sandbox %s has no process %q", sandboxID, name)
}

// CreateVolume records a volume.
func (d *DB) CreateVolume(ctx context.Context, v *store.Volume) error {
	_, err := d.pool.Exec(ctx, `INSERT INTO volumes (name, created_at) VALUES ($1, $2)`, v.Name, v.CreatedAt.UnixNano())
	if _, ok := violated(err, uniqueViolation); ok {
		return errdefs.AlreadyExists("volume %s exists already", v.Name)
	}
	if err != nil {
		return fmt.Errorf("insert volume %s: %w", v.Name, err)
	}
	return nil
}

// ListVolumes returns every volume, by name.
func (d *DB) ListVolumes(ctx context.Context) ([]*store.Volume, error) {
	out, err := query(ctx, d, sqlrows.ScanVolume, `SELECT `+sqlrows.VolumeColumns+` FROM volumes ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list volumes: %w", err)
	}
	return out, nil
}

// DeleteVolume removes a volume's record.
func (d *DB) DeleteVolume(ctx context.Context, name string) error {
	tag, err := d.pool.Exec(ctx, `DELETE FROM volumes WHERE name = $1`, name)
	if err != nil {
		return fmt.Errorf("delete volume %s: %w", name, err)
	}
	return expectOne(tag, "volume %s not found", name)
}

// CreateAPIKey records a key.
func (d *DB) CreateAPIKey(ctx context.Context, k *store.APIKey) error {
	_, err := d.pool.Exec(ctx, `INSERT INTO api_keys (`+sqlrows.APIKeyColumns+`) VALUES ($1, $2, $3, $4, $5, $6)`,
		sqlrows.APIKeyArgs(k)...)
	if _, ok := violated(err, uniqueViolation); ok {
		return errdefs.AlreadyExists("API key %s exists already", k.Name)
	}
	if err != nil {
		return fmt.Errorf("insert API key %s: %w", k.Name, err)
	}
	return nil
}

// ListAPIKeys returns every key, by name.
func (d *DB) ListAPIKeys(ctx context.Context) ([]*store.APIKey, error) {
	return d.queryAPIKeys(ctx, `SELECT `+sqlrows.APIKeyColumns+` FROM api_keys ORDER BY name`)
}

// APIKeyByHash finds a key by its hash.
func (d *DB) APIKeyByHash(ctx context.Context, hash string) (*store.APIKey, error) {
	keys, err := d.queryAPIKeys(ctx, `SELECT `+sqlrows.APIKeyColumns+` FROM api_keys WHERE hash = $1`, hash)
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, errdefs.NotFound("no such API key")
	}
	return keys[0], nil
}

func (d *DB) queryAPIKeys(ctx context.Context, q string, args ...any) ([]*store.APIKey, error) {
	out, err := query(ctx, d, sqlrows.ScanAPIKey, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list API keys: %w", err)
	}
	return out, nil
}

// DeleteAPIKey removes a key.
func (d *DB) DeleteAPIKey(ctx context.Context, name string) error {
	tag, err := d.pool.Exec(ctx, `DELETE FROM api_keys WHERE name = $1`, name)
	if err != nil {
		return fmt.Errorf("delete API key %s: %w", name, err)
	}
	return expectOne(tag, "API key %s not found", name)
}
