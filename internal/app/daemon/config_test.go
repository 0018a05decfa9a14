package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/internal/runtime/oci"
	"golang.org/x/sys/unix"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Config)
		want   []string // parts of the error; none means valid
	}{
		{"defaults", func(*Config) {}, nil},
		{"every problem at once", func(c *Config) {
			c.Version, c.Listen, c.DataDir, c.LogLevel = 2, "7070", "relative", "loud"
		}, []string{"version must be 1", "listen", "data_dir must be an absolute path", "log_level"}},
		{"data dir too deep for agent sockets", func(c *Config) { c.DataDir = "/" + strings.Repeat("d", 80) }, []string{"too long for unix socket paths"}},
		{"no runc", func(c *Config) { c.Runc = "" }, []string{"runc must name"}},
		{"no runsc", func(c *Config) { c.Runsc = "" }, []string{"runsc must name"}},
		{"gvisor by name", func(c *Config) { c.Runtime = "gvisor" }, nil},
		{"unknown runtime", func(c *Config) { c.Runtime = "kata" }, []string{`runtime must be runc or gvisor`, `"kata"`}},
		{"preview domain", func(c *Config) { c.PreviewDomain = "preview.example.com" }, nil},
		{"no host routing", func(c *Config) { c.PreviewDomain = "" }, nil},
		{"preview domain with a port", func(c *Config) { c.PreviewDomain = "localhost:7070" }, []string{"preview_domain", `"localhost:7070"`}},
		{"preview domain in capitals", func(c *Config) { c.PreviewDomain = "Example.com" }, []string{"preview_domain"}},
		{"postgres store", func(c *Config) { c.Store = "postgres://hutch@db.example.com/hutch" }, nil},
		{"store not postgres", func(c *Config) { c.Store = "mysql://hutch:secret@db/hutch" },
			[]string{"store must be empty (SQLite in data_dir) or a PostgreSQL URL", "mysql://hutch:xxxxx@db/hutch is not a postgres:// URL"}},
		{"store with a bad port", func(c *Config) { c.Store = "postgres://hutch:secret@db:port/hutch" }, []string{"store must be", `invalid port ":port"`}},
		{"no e2b front", func(c *Config) { c.E2BListen = new(string) }, nil},
		{"e2b front without a port", func(c *Config) { addr := "127.0.0.1"; c.E2BListen = &addr }, []string{"e2b_listen", `"127.0.0.1"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.change(&c)
			err := c.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestConfigFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.toml")
	if err := os.WriteFile(good, []byte("version = 1\nlisten = \"127.0.0.1:9\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := Default()
	if err := c.LoadFile(good); err != nil || c.Listen != "127.0.0.1:9" || c.DataDir != "/var/lib/hutch" {
		t.Fatalf("load = %+v, %v; want listen from the file, the rest defaults", c, err)
	}
	bad := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(bad, []byte("version = 1\nlisten_addr = \"x\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c = Default()
	if err := c.LoadFile(bad); err == nil || !strings.Contains(err.Error(), "listen_addr") {
		t.Fatalf("unknown key: %v, want an error naming it", err)
	}
}

// The E2B front listens on 127.0.0.1:49983 for the default data dir only:
// a daemon on another one picks a free port, as it gets a run dir of its
// own, so that it starts beside the first. What is given, by a flag or the
// file, wins; "" is no front.
func TestE2BListen(t *testing.T) {
	t.Parallel()
	given := func(addr string) *string { return &addr }
	tests := []struct {
		name    string
		dataDir string
		given   *string
		want    string
	}{
		{"default data dir", "/var/lib/hutch", nil, "127.0.0.1:49983"},
		{"default data dir, unclean", "/var/lib/hutch/", nil, "127.0.0.1:49983"},
		{"another data dir", "/srv/a", nil, "127.0.0.1:0"},
		{"given, another data dir", "/srv/a", given("127.0.0.1:49984"), "127.0.0.1:49984"},
		{"the default given, another data dir", "/srv/a", given("127.0.0.1:49983"), "127.0.0.1:49983"},
		{"none, default data dir", "/var/lib/hutch", given(""), ""},
		{"none, another data dir", "/srv/a", given(""), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			c.DataDir, c.E2BListen = tt.dataDir, tt.given
			if got := c.e2bListen(); got != tt.want {
				t.Errorf("e2bListen() = %q, want %q", got, tt.want)
			}
		})
	}

	// In the file, e2b_listen = "" is no front; no e2b_listen is the
	// derived address.
	dir := t.TempDir()
	for _, tt := range []struct{ file, want string }{
		{"version = 1\ndata_dir = \"/srv/a\"\ne2b_listen = \"\"\n", ""},
		{"version = 1\ndata_dir = \"/srv/a\"\n", "127.0.0.1:0"},
		{"version = 1\n", "127.0.0.1:49983"},
	} {
		path := filepath.Join(dir, "hutch.toml")
		if err := os.WriteFile(path, []byte(tt.file), 0o600); err != nil {
			t.Fatal(err)
		}
		c := Default()
		if err := c.LoadFile(path); err != nil {
			t.Fatal(err)
		}
		if got := c.e2bListen(); got != tt.want {
			t.Errorf("file %q: e2bListen() = %q, want %q", tt.file, got, tt.want)
		}
	}
}

func TestAPIKeyIsMadeOnceAndPrivate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "api.key")
	key, err := loadOrCreateKey(path)
	if err != nil || !strings.HasPrefix(key, "hutch_") || len(key) < 40 {
		t.Fatalf("key %q, %v", key, err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v (%v), want 0600", fi.Mode(), err)
	}
	again, err := loadOrCreateKey(path)
	if err != nil || again != key {
		t.Fatalf("second start made another key: %q vs %q (%v)", again, key, err)
	}
}

func TestDefaultRuntime(t *testing.T) {
	tests := []struct {
		configured string
		unusable   map[string]string
		pending    map[string]bool
		want, why  string
	}{
		{"", nil, nil, "gvisor", "usable"},
		{"", map[string]string{"gvisor": "runsc not found"}, nil, "runc", "gvisor is not usable: runsc not found"},
		{"", map[string]string{"gvisor": "runsc is being built"}, map[string]bool{"gvisor": true}, "gvisor", "was being set up"},
		{"runc", nil, nil, "runc", "set by the configuration"},
		{"gvisor", map[string]string{"gvisor": "runsc not found"}, nil, "gvisor", "set by the configuration"},
	}
	for _, tt := range tests {
		name, why := defaultRuntime(tt.configured, tt.unusable, tt.pending)
		if name != tt.want || !strings.Contains(why, tt.why) {
			t.Errorf("defaultRuntime(%q, %v) = %q, %q; want %q and a reason with %q", tt.configured, tt.unusable, name, why, tt.want, tt.why)
		}
	}
}

func TestBesideExecutable(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "hutch")
	if got := besideExecutable(exe, "runsc"); got != "runsc" {
		t.Errorf("nothing beside: %q, want the bare name for PATH", got)
	}
	marker := filepath.Join(dir, "runsc"+oci.BuildingSuffix)
	if err := os.WriteFile(marker, []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := besideExecutable(exe, "runsc"); got != filepath.Join(dir, "runsc") {
		t.Errorf("runsc being built beside hutch: %q, want its path, to probe again", got)
	}
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "runsc"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := besideExecutable(exe, "runsc"); got != filepath.Join(dir, "runsc") {
		t.Errorf("runsc beside hutch: %q, want it", got)
	}
	if got := besideExecutable(exe, "/opt/runsc"); got != "/opt/runsc" {
		t.Errorf("a path: %q, want it unchanged", got)
	}
}

// The data dir may be searched, not listed, by others (runc reaches the
// sandboxes' roots from inside their user namespaces); an older 0700 one is
// opened up, the run dir stays closed.
func TestDirModes(t *testing.T) {
	base := t.TempDir()
	c := Default()
	c.DataDir, c.RunDir = filepath.Join(base, "data"), filepath.Join(base, "run")
	if err := os.Mkdir(c.DataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := c.ensureDirs(); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{
		c.DataDir: 0o711, c.sandboxDir(): 0o711, c.agentDir(): 0o755, c.RunDir: 0o700,
		c.diskDir(): 0o700, c.stateRoot("runc"): 0o700,
	} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v (%v), want %v", path, fi.Mode().Perm(), err, want)
		}
	}
	// On ext4 the directories holding one per sandbox spread them.
	var st unix.Statfs_t
	if err := unix.Statfs(base, &st); err != nil || st.Type != unix.EXT4_SUPER_MAGIC {
		return
	}
	for _, dir := range []string{c.sandboxDir(), c.diskDir(), c.stateRoot("runc"), c.stateRoot("runsc"), c.DataDir} {
		f, err := os.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
		f.Close()
		if spread := err == nil && flags&topDir != 0; spread != (dir != c.DataDir) {
			t.Errorf("%s: top-directory flag %v (flags %#x, %v)", dir, spread, flags, err)
		}
	}
}

// The agent is a copy anyone may run, replaced whole at each start.
func TestCopyAgent(t *testing.T) {
	dir := t.TempDir()
	for _, content := range []string{"first", "second"} {
		path, err := copyAgent(strings.NewReader(content), dir)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		fi, _ := os.Stat(path)
		if err != nil || string(b) != content || fi.Mode().Perm() != 0o755 {
			t.Errorf("copy holds %q (%v), mode %v; want %q, 0755", b, err, fi.Mode().Perm(), content)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("dir holds %d entries, want the copy alone", len(entries))
	}
}
