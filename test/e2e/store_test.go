package e2e

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/storage/store/pgtest"
)

// A daemon whose state is in PostgreSQL (--store): it makes a sandbox and
// a key there, keeps no SQLite database in its data dir, and after a
// SIGKILL and a start finds both, the sandbox's files with it.
func TestDaemonOnPostgres(t *testing.T) {
	t.Parallel()
	if skipReason != "" {
		t.Skip(skipReason)
	}
	url := pgtest.Start(t) // its cleanup, last, comes after the daemon's
	d := startDaemonWith(t, "--store", url)
	sb := d.create(client.CreateSandboxRequest{})
	if res := d.exec(sb.ID, "echo kept > state.txt && sync"); res.ExitCode != 0 {
		t.Fatalf("write: %+v", res)
	}
	if _, err := d.client.CreateAPIKeyWith(t.Context(), client.CreateAPIKeyRequest{Name: "on-postgres", Workspace: "pg"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(d.dataDir, "hutch.db")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the data dir has an SQLite database beside --store: %v", err)
	}

	d.kill()
	d.start()
	if res := d.exec(sb.ID, "cat state.txt"); res.Stdout != "kept\n" {
		t.Fatalf("after a restart: %+v", res)
	}
	keys, err := d.client.ListAPIKeys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, k := range keys {
		found = found || k.Name == "on-postgres" && k.Workspace == "pg"
	}
	if !found {
		t.Errorf("after a restart the keys are %+v, without on-postgres", keys)
	}
	if err := d.client.DeleteAPIKey(t.Context(), "on-postgres"); err != nil {
		t.Fatal(err)
	}
}
