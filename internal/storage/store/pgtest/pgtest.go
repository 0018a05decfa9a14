// Package pgtest starts throwaway PostgreSQL servers for tests, from
// Debian's binaries (the postgresql package): initdb and postgres in
// /usr/lib/postgresql/<version>/bin.
//
// A server listens on a unix socket in its own temporary directory and on
// no TCP port, so it takes no other process's port and no other process
// reaches it; it trusts every local connection. It runs with fsync off:
// its data is thrown away with it.
//
// Starting one takes about a second (initdb, mostly), so a package's tests
// share one: its TestMain calls Main, and Start gives each test a database
// of its own on it (CREATE DATABASE, some milliseconds). Without Main,
// Start starts a server for the test alone.
package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hutchdev/hutch/internal/base/testserver"
)

// binGlob finds Debian's server binaries, of whichever major version is
// installed.
const binGlob = "/usr/lib/postgresql/*/bin/postgres"

// superuser is the role initdb makes, which the tests connect as.
const superuser = "postgres"

var (
	shared = testserver.Shared[*server]{
		Name: "pgtest", SkipErr: errSkip, Stop: (*server).stop,
		Start: func(ctx context.Context) (*server, error) { return start(ctx) },
	}
	databases atomic.Int64
)

// Main runs a package's tests (m.Run) with one server that Start hands
// databases on, started by the first Start, and stops it after them. Call
// it from TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
func Main(m *testing.M) { shared.Main(m) }

// Start returns the URL (postgres://…) of an empty database on a running
// server, which t.Cleanup drops (and, without Main, stops and removes the
// server). It skips the test when Debian's postgresql package is not
// installed.
func Start(t *testing.T) string {
	t.Helper()
	srv, ok := shared.Get(t)
	if !ok {
		var err error
		srv, err = start(t.Context())
		if errors.Is(err, errSkip) {
			t.Skip(err)
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := srv.stop(); err != nil {
				t.Error(err)
			}
		})
	}
	name := fmt.Sprintf("test_%d", databases.Add(1))
	if err := srv.exec(t.Context(), "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The test's own connections are closed by now (cleanups run last
		// registered first); FORCE ends any it left open.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			t.Error(err)
		}
	})
	return srv.url(name)
}

// errSkip marks what a test skips for: a machine without the server, or
// one where it cannot be run as another user.
var errSkip = errors.New("pgtest")

// server is one running postgres.
type server struct {
	dir  string // the data dir's parent, which holds the socket too
	cmd  *exec.Cmd
	out  *bytes.Buffer // postgres's log, for the error when it ends early
	done chan struct{} // closed when it exited
}

// start makes a data dir with initdb and starts postgres on it, both as
// an unprivileged user when run as root (postgres refuses root).
func start(ctx context.Context) (_ *server, err error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	as, err := runAs()
	if err != nil {
		return nil, err
	}
	// Not t.TempDir: a unix socket's path must stay under 108 bytes, and a
	// shared server outlives the test that started it.
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir)
		}
	}()
	if as != nil {
		if err := os.Chown(dir, as.uid, as.gid); err != nil {
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	began := time.Now()
	initdb := command(ctx, as, filepath.Join(bin, "initdb"), "--pgdata", data, "--username", superuser,
		"--auth", "trust", "--encoding", "UTF8", "--locale", "C", "--no-sync")
	initdb.Dir = dir
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %w: %s", err, out)
	}
	initialized := time.Now()
	s := &server{dir: dir, out: &bytes.Buffer{}, done: make(chan struct{})}
	// Not ctx: the server outlives it (stop ends it).
	s.cmd = command(context.Background(), as, filepath.Join(bin, "postgres"), "-D", data,
		"-c", "listen_addresses=", "-c", "unix_socket_directories="+dir,
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=200")
	s.cmd.Dir = dir
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	go func() {
		_ = s.cmd.Wait()
		close(s.done)
	}()
	if err := s.ready(ctx); err != nil {
		_ = s.stop()
		return nil, err
	}
	if os.Getenv("PGTEST_VERBOSE") != "" {
		fmt.Fprintf(os.Stderr, "pgtest: server in %s ready in %v (initdb %v, postgres %v)\n", dir,
			time.Since(began).Round(time.Millisecond), initialized.Sub(began).Round(time.Millisecond), time.Since(initialized).Round(time.Millisecond))
	}
	return s, nil
}

// ready waits until the server takes connections.
func (s *server) ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, s.url("postgres"))
		if err == nil {
			return conn.Close(ctx)
		}
		select {
		case <-s.done:
			return fmt.Errorf("postgres exited: %s", s.out)
		case <-ctx.Done():
			return fmt.Errorf("postgres not ready: %w: %s", err, s.out)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// stop shuts the server down (fast: it ends its sessions) and removes its
// files.
func (s *server) stop() error {
	// SIGINT is postgres's fast shutdown; SIGKILL if it hangs.
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.done:
	case <-time.After(15 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	if err := os.RemoveAll(s.dir); err != nil {
		return fmt.Errorf("remove postgres's files: %w", err)
	}
	return nil
}

// url is the URL of database name, over the socket.
func (s *server) url(name string) string {
	q := url.Values{"host": {s.dir}, "sslmode": {"disable"}}
	return (&url.URL{Scheme: "postgres", User: url.User(superuser), Path: "/" + name, RawQuery: q.Encode()}).String()
}

// exec runs one statement on the server's maintenance database.
func (s *server) exec(ctx context.Context, stmt string) error {
	conn, err := pgx.Connect(ctx, s.url("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, stmt); err != nil {
		return fmt.Errorf("%s: %w", stmt, err)
	}
	return nil
}

// binDir is the bin directory of the newest PostgreSQL installed.
func binDir() (string, error) {
	found, _ := filepath.Glob(binGlob)
	var best string
	bestVersion := -1
	for _, p := range found {
		// /usr/lib/postgresql/<version>/bin/postgres
		v, err := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(p))))
		if err != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(p), "initdb")); err == nil && v > bestVersion {
			best, bestVersion = filepath.Dir(p), v
		}
	}
	if best == "" {
		return "", fmt.Errorf("%w: no PostgreSQL server (%s and initdb beside it): install Debian's postgresql package", errSkip, binGlob)
	}
	return best, nil
}

// identity is a user to run as.
type identity struct {
	name     string
	uid, gid int
}

// runAs is whom the server runs as: nil (this process's user) unless that
// is root, which postgres refuses; then the postgres system user if there
// is one, else nobody.
func runAs() (*identity, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		return nil, fmt.Errorf("%w: running as root, and no setpriv (util-linux) to run postgres as another user", errSkip)
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.Atoi(u.Uid)
		gid, err2 := strconv.Atoi(u.Gid)
		if err1 == nil && err2 == nil {
			return &identity{name: name, uid: uid, gid: gid}, nil
		}
	}
	return nil, fmt.Errorf("%w: running as root, and neither user postgres nor nobody to run postgres as", errSkip)
}

// command is argv run as as (nil: as this process), through setpriv, and
// killed when ctx ends (nil: it is not). The
// server is killed with SIGQUIT (postgres's immediate shutdown) if the
// test binary dies before it stops it, so that a crashed test leaves no
// server behind (only its files, in the temporary directory).
func command(ctx context.Context, as *identity, argv ...string) *exec.Cmd {
	if as != nil {
		argv = slices.Concat([]string{"setpriv", "--reuid=" + strconv.Itoa(as.uid), "--regid=" + strconv.Itoa(as.gid),
			"--clear-groups", "--pdeathsig=SIGQUIT", "--"}, argv)
	}
	// #nosec G204 -- argv is the server's binaries and their flags
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if as == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGQUIT}
	} else {
		cmd.Env = append(cmd.Env, "HOME="+os.TempDir(), "USER="+as.name)
	}
	return cmd
}

// Serve starts a server outside a test (the bench's scale-out row) and
// returns the URL of an empty database on it, and stop, which stops the
// server and removes its files.
func Serve(ctx context.Context) (url string, stop func() error, err error) {
	srv, err := start(ctx)
	if err != nil {
		return "", nil, err
	}
	if err := srv.exec(ctx, "CREATE DATABASE bench"); err != nil {
		return "", nil, errors.Join(err, srv.stop())
	}
	return srv.url("bench"), srv.stop, nil
}
