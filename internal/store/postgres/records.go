package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hutchdev/hutch/internal/errdefs"
	"github.com/hutchdev/hutch/internal/netpolicy"
	"github.com/hutchdev/hutch/internal/store"
)

// PutProcess inserts or replaces a sandbox's background process.
func (d *DB) PutProcess(ctx context.Context, p *store.Process) error {
	argv, err := json.Marshal(p.Argv)
	if err != nil {
		return err
	}
	env, err := json.Marshal(nonNil(p.Env))
	if err != nil {
		return err
	}
	_, err = d.pool.Exec(ctx, `INSERT INTO processes
		(sandbox_id, name, argv, cwd, "user", env, port, running, created_at, for_user, stdin, public, slot)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
		ON CONFLICT (sandbox_id, name) DO UPDATE SET
			argv = excluded.argv, cwd = excluded.cwd, "user" = excluded."user", env = excluded.env,
			port = excluded.port, running = excluded.running, created_at = excluded.created_at,
			for_user = excluded.for_user, stdin = excluded.stdin, public = excluded.public, slot = excluded.slot`,
		p.SandboxID, p.Name, string(argv), p.Cwd, p.User, string(env), p.Port, p.Running, p.CreatedAt.UnixNano(), p.ForUser, p.Stdin, p.Public, p.Slot)
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
	rows, err := d.pool.Query(ctx, `SELECT name, argv, cwd, "user", env, port, running, created_at, for_user, stdin, public, slot
		FROM processes WHERE sandbox_id = $1 ORDER BY created_at, name`, sandboxID)
	if err != nil {
		return nil, fmt.Errorf("list processes of sandbox %s: %w", sandboxID, err)
	}
	defer rows.Close()
	var out []*store.Process
	for rows.Next() {
		p := store.Process{SandboxID: sandboxID}
		var argv, env string
		var created int64
		if err := rows.Scan(&p.Name, &argv, &p.Cwd, &p.User, &env, &p.Port, &p.Running, &created, &p.ForUser, &p.Stdin, &p.Public, &p.Slot); err != nil {
			return nil, fmt.Errorf("list processes of sandbox %s: %w", sandboxID, err)
		}
		if err := json.Unmarshal([]byte(argv), &p.Argv); err != nil {
			return nil, fmt.Errorf("decode command of process %s: %w", p.Name, err)
		}
		if err := json.Unmarshal([]byte(env), &p.Env); err != nil {
			return nil, fmt.Errorf("decode env of process %s: %w", p.Name, err)
		}
		p.CreatedAt = time.Unix(0, created).UTC()
		out = append(out, &p)
	}
	if err := rows.Err(); err != nil {
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
	rows, err := d.pool.Query(ctx, `SELECT name, created_at FROM volumes ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list volumes: %w", err)
	}
	defer rows.Close()
	var out []*store.Volume
	for rows.Next() {
		var v store.Volume
		var created int64
		if err := rows.Scan(&v.Name, &created); err != nil {
			return nil, fmt.Errorf("list volumes: %w", err)
		}
		v.CreatedAt = time.Unix(0, created).UTC()
		out = append(out, &v)
	}
	if err := rows.Err(); err != nil {
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
	_, err := d.pool.Exec(ctx, `INSERT INTO api_keys (name, hash, tools_mode, network_mode, workspace, created_at) VALUES ($1, $2, $3, $4, $5, $6)`,
		k.Name, k.Hash, k.ToolsMode, orFull(k.NetworkMode), k.Workspace, k.CreatedAt.UnixNano())
	if _, ok := violated(err, uniqueViolation); ok {
		return errdefs.AlreadyExists("API key %s exists already", k.Name)
	}
	if err != nil {
		return fmt.Errorf("insert API key %s: %w", k.Name, err)
	}
	return nil
}

const apiKeyColumns = `name, hash, tools_mode, network_mode, workspace, created_at`

// ListAPIKeys returns every key, by name.
func (d *DB) ListAPIKeys(ctx context.Context) ([]*store.APIKey, error) {
	return d.queryAPIKeys(ctx, `SELECT `+apiKeyColumns+` FROM api_keys ORDER BY name`)
}

// APIKeyByHash finds a key by its hash.
func (d *DB) APIKeyByHash(ctx context.Context, hash string) (*store.APIKey, error) {
	keys, err := d.queryAPIKeys(ctx, `SELECT `+apiKeyColumns+` FROM api_keys WHERE hash = $1`, hash)
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, errdefs.NotFound("no such API key")
	}
	return keys[0], nil
}

// orFull is a key's network mode as stored: full when not given.
func orFull(mode string) string {
	if mode == "" {
		return string(netpolicy.Full)
	}
	return mode
}

func (d *DB) queryAPIKeys(ctx context.Context, query string, args ...any) ([]*store.APIKey, error) {
	rows, err := d.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list API keys: %w", err)
	}
	defer rows.Close()
	var out []*store.APIKey
	for rows.Next() {
		var k store.APIKey
		var created int64
		if err := rows.Scan(&k.Name, &k.Hash, &k.ToolsMode, &k.NetworkMode, &k.Workspace, &created); err != nil {
			return nil, fmt.Errorf("list API keys: %w", err)
		}
		k.CreatedAt = time.Unix(0, created).UTC()
		out = append(out, &k)
	}
	if err := rows.Err(); err != nil {
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
