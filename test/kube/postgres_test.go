package kube_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hutchdev/hutch/test/kube/cluster"
)

// postgres is the external database of the test's Hutch: a server of
// Debian's on the cluster's node address, which pods reach, with a
// password, as a real one would be (internal/storage/store/pgtest's servers take
// no TCP connections).
type postgres struct {
	dir      string
	cmd      *exec.Cmd
	done     chan struct{}
	URL      string // without the password
	Password string
}

// startPostgres starts a server on host:port with its files in dir, and a
// database hutch in it. It runs as the postgres user (it refuses root);
// the caller stops it.
func startPostgres(t *testing.T, dir, host string, port int) *postgres {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		t.Skip("needs Debian's postgresql package (./setup installs it)")
	}
	bin := filepath.Dir(bins[len(bins)-1])
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Skip("needs the postgres user (Debian's postgresql package makes it)")
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, 16)
	rand.Read(raw)
	p := &postgres{dir: dir, done: make(chan struct{}), Password: hex.EncodeToString(raw)}
	pwfile := filepath.Join(dir, "password")
	if err := os.WriteFile(pwfile, []byte(p.Password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(pwfile, uid, gid); err != nil {
		t.Fatal(err)
	}
	as := func(argv ...string) *exec.Cmd {
		argv = append([]string{"setpriv", "--reuid=" + u.Uid, "--regid=" + u.Gid, "--clear-groups", "--pdeathsig=SIGQUIT", "--"}, argv...)
		cmd := exec.Command(argv[0], argv[1:]...) // #nosec G204 -- Debian's server binaries
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "LC_ALL=C", "HOME="+dir)
		return cmd
	}
	data := filepath.Join(dir, "data")
	if out, err := as(filepath.Join(bin, "initdb"), "--pgdata", data, "--username", "postgres", "--pwfile", pwfile,
		"--auth-local", "trust", "--auth-host", "scram-sha-256", "--encoding", "UTF8", "--locale", "C", "--no-sync").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v: %s", err, out)
	}
	// The node and pods reach it, from the cluster's addresses only.
	hba, err := os.OpenFile(filepath.Join(data, "pg_hba.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = fmt.Fprintf(hba, "host all all %s/32 scram-sha-256\nhost all all %s scram-sha-256\n", host, cluster.PodCIDR)
	if cerr := hba.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(dir, "postgres.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	p.cmd = as(filepath.Join(bin, "postgres"), "-D", data, "-c", "listen_addresses="+host, "-c", fmt.Sprintf("port=%d", port),
		"-c", "unix_socket_directories="+dir, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	p.cmd.Stdout, p.cmd.Stderr = log, log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	local := (&url.URL{Scheme: "postgres", User: url.User("postgres"), Path: "/postgres",
		RawQuery: url.Values{"host": {dir}, "port": {strconv.Itoa(port)}, "sslmode": {"disable"}}.Encode()}).String()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, local)
		if err == nil {
			_, err = conn.Exec(ctx, "CREATE DATABASE hutch")
			conn.Close(context.WithoutCancel(ctx))
			if err != nil {
				t.Fatal(err)
			}
			break
		}
		select {
		case <-p.done:
			b, _ := os.ReadFile(filepath.Join(dir, "postgres.log"))
			t.Fatalf("postgres exited: %s", b)
		case <-ctx.Done():
			t.Fatalf("postgres not ready: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	p.URL = fmt.Sprintf("postgres://postgres@%s:%d/hutch?sslmode=disable", host, port)
	return p
}

// stop shuts the server down fast (SIGINT), or kills it.
func (p *postgres) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}
