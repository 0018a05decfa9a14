// Package s3test starts throwaway S3 servers for tests: Versity's S3
// gateway (github.com/versity/versitygw, Apache-2.0), a real S3 server
// over a POSIX directory, run as a process of its own.
//
// Its binary is built from the Go module proxy on first use (`go install
// module@version`, about a minute and a half on two cores) into a cache
// directory keyed by module and version, /var/cache/hutch/s3/<module>@<version>
// (or the user's cache directory where /var/cache is not writable), and
// reused from there. Where it cannot be built (no network to the proxy),
// Start skips the test and says why; under CI (CI=true), which has the
// network, it fails instead, so that the S3 half of a suite is not
// silently skipped there.
//
// A server listens on a free loopback port, keeps its objects in its own
// temporary directory, and has one account whose secret key is made at
// random; the key is given to it in its environment (not its arguments,
// which any process can read) and never printed. A package's tests share
// one (its TestMain calls Main) and Start gives each a bucket of its own;
// without Main, Start starts a server for the test alone.
package s3test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/hutchdev/hutch/internal/base/testserver"
)

// The server: a pinned version of a module the Go module proxy serves,
// which builds with this repository's Go (1.26) with CGO_ENABLED=0.
const (
	Module  = "github.com/versity/versitygw"
	Version = "v1.8.0"
	command = Module + "/cmd/versitygw"
	binName = "versitygw"
)

// Region is the region the server and its buckets are in.
const Region = "us-east-1"

// accessKey is the server's account; only its secret key is secret.
const accessKey = "s3test"

// Bucket is an empty bucket on a running server. Its String leaves the
// secret key out; print nothing else of it.
type Bucket struct {
	// Endpoint is the server's URL, http://127.0.0.1:<port>.
	Endpoint  string
	Name      string
	Region    string
	AccessKey string
	SecretKey string
	srv       *server
}

func (b Bucket) String() string {
	return fmt.Sprintf("bucket %s at %s (access key %s)", b.Name, b.Endpoint, b.AccessKey)
}

// GoString is String, for %#v.
func (b Bucket) GoString() string { return b.String() }

// URL is an s3:// URL of the bucket with prefix, such as Hutch's image
// store takes: no keys in it.
func (b Bucket) URL(prefix string) string {
	q := url.Values{"endpoint": {b.Endpoint}, "region": {b.Region}}
	return (&url.URL{Scheme: "s3", Host: b.Name, Path: "/" + prefix, RawQuery: q.Encode()}).String()
}

// Client is a client of the server with the bucket's keys, for a test to
// look beneath the code it tests.
func (b Bucket) Client() *minio.Client { return b.srv.client }

// Uploads lists the bucket's unfinished multipart uploads, as
// "key (upload ID)".
func (b Bucket) Uploads(ctx context.Context) ([]string, error) {
	var ups []string
	for u := range b.srv.client.ListIncompleteUploads(ctx, b.Name, "", true) {
		if u.Err != nil {
			return nil, u.Err
		}
		ups = append(ups, fmt.Sprintf("%s (%s)", u.Key, u.UploadID))
	}
	return ups, nil
}

var (
	shared = testserver.Shared[*server]{
		Name: "s3test", SkipErr: errSkip, Stop: (*server).stop, Skip: skip,
		Start: func(ctx context.Context) (*server, error) { return start(ctx, "127.0.0.1") },
	}
	buckets atomic.Int64
)

// Main runs a package's tests (m.Run) with one server, started by the
// first Start, and stops it after them. Call it from TestMain:
//
//	func TestMain(m *testing.M) { s3test.Main(m) }
func Main(m *testing.M) { shared.Main(m) }

// Start returns a new, empty bucket on a running server, which t.Cleanup
// empties and removes (and, without Main, stops and removes the server).
// It skips the test when the server cannot be built or run here.
func Start(t testing.TB) Bucket {
	t.Helper()
	srv, _ := shared.Get(t) // nil without Main: startOn starts one
	return startOn(t, srv, "127.0.0.1")
}

// StartOn is Start on a server of t's own listening on host, an address
// of this machine others reach it on (a bridge's, for daemons in network
// namespaces of the test's), instead of the loopback.
func StartOn(t testing.TB, host string) Bucket {
	t.Helper()
	return startOn(t, nil, host)
}

func startOn(t testing.TB, srv *server, host string) Bucket {
	t.Helper()
	if srv == nil {
		var err error
		srv, err = start(t.Context(), host)
		if errors.Is(err, errSkip) {
			skip(t, err.Error())
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
	b := Bucket{Endpoint: srv.endpoint, Name: fmt.Sprintf("test-%d", buckets.Add(1)), Region: Region,
		AccessKey: accessKey, SecretKey: srv.secret, srv: srv}
	if err := srv.client.MakeBucket(t.Context(), b.Name, minio.MakeBucketOptions{Region: Region}); err != nil {
		t.Fatalf("make bucket %s: %v", b.Name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := srv.removeBucket(ctx, b.Name); err != nil {
			t.Errorf("remove bucket %s: %v", b.Name, err)
		}
	})
	return b
}

// Require skips t (or fails it under CI) when the server cannot be built
// here: a suite calls it once, before its subtests each Start a bucket,
// to skip once rather than in every subtest.
func Require(t testing.TB) {
	t.Helper()
	_, err := Binary(t.Context())
	if errors.Is(err, errSkip) {
		skip(t, err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
}

// skip skips t, or fails it under CI, which has the network to build the
// server: there a skip would hide that the S3 tests never ran.
func skip(t testing.TB, reason string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: CI is expected to build the S3 server, so this fails instead of skipping)", reason)
	}
	t.Skip(reason)
}

// errSkip marks why a test skips: a server that cannot be built here.
var errSkip = errors.New("s3test")

// server is one running gateway.
type server struct {
	dir      string // its objects (data/) and its working directory
	endpoint string
	secret   string
	cmd      *exec.Cmd
	out      *lockedBuffer
	done     chan struct{} // closed when it exited
	client   *minio.Client
	tr       *http.Transport
}

// start builds the gateway if it is not built yet and starts it on a free
// port of host. Another process may take the port between its choice and
// the gateway's listening on it; then it tries another.
func start(ctx context.Context, host string) (*server, error) {
	began := time.Now()
	bin, err := Binary(ctx)
	if err != nil {
		return nil, err
	}
	built := time.Now()
	var s *server
	for attempt := 1; ; attempt++ {
		s, err = startOnce(ctx, bin, host)
		if err == nil || !errors.Is(err, errPortTaken) || attempt == 3 {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	if os.Getenv("S3TEST_VERBOSE") != "" {
		fmt.Fprintf(os.Stderr, "s3test: %s@%s in %s ready at %s in %v (build or cache %v, start %v)\n", Module, Version, s.dir, s.endpoint,
			time.Since(began).Round(time.Millisecond), built.Sub(began).Round(time.Millisecond), time.Since(built).Round(time.Millisecond))
	}
	return s, nil
}

var errPortTaken = errors.New("port taken")

func startOnce(ctx context.Context, bin, host string) (_ *server, err error) {
	// Not t.TempDir: a shared server outlives the test that started it.
	dir, err := os.MkdirTemp("", "s3test-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir)
		}
	}()
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		return nil, err
	}
	addr, err := freePort(host)
	if err != nil {
		return nil, err
	}
	s := &server{dir: dir, endpoint: "http://" + addr, secret: randomHex(20), out: &lockedBuffer{}, done: make(chan struct{})}
	// Not ctx: the server outlives it (stop ends it).
	// #nosec G204 -- bin is the gateway this package built, with its flags
	s.cmd = exec.Command(bin, "--port", addr, "--quiet", "posix", data)
	s.cmd.Dir = dir
	// Its own environment, not this process's: no VGW_* variable of the
	// machine's changes how it runs, and the keys are not in its argv.
	s.cmd.Env = []string{"HOME=" + dir, "PATH=/usr/bin:/bin",
		"ROOT_ACCESS_KEY_ID=" + accessKey, "ROOT_SECRET_ACCESS_KEY=" + s.secret}
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	// Killed with the test binary, should it die before stop: a crashed
	// test leaves no server (only its files, in the temporary directory).
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", binName, err)
	}
	go func() {
		_ = s.cmd.Wait()
		close(s.done)
	}()
	if s.tr, err = minio.DefaultTransport(false); err != nil {
		_ = s.stop()
		return nil, err
	}
	s.client, err = minio.New(addr, &minio.Options{Creds: credentials.NewStaticV4(accessKey, s.secret, ""),
		Region: Region, BucketLookup: minio.BucketLookupPath, Transport: s.tr, MaxRetries: 1})
	if err != nil {
		_ = s.stop()
		return nil, err
	}
	if err := s.ready(ctx); err != nil {
		_ = s.stop()
		return nil, err
	}
	return s, nil
}

// ready waits until the server answers a request with the keys.
func (s *server) ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		_, err := s.client.ListBuckets(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-s.done:
			out := s.output()
			if strings.Contains(out, "address already in use") {
				return fmt.Errorf("%w: %s", errPortTaken, out)
			}
			return fmt.Errorf("%s exited: %s", binName, out)
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w: %s", binName, err, s.output())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// output is what the server printed, without its secret key.
func (s *server) output() string {
	return strings.ReplaceAll(s.out.String(), s.secret, "<secret key>")
}

// stop ends the server (SIGTERM; SIGKILL if it lingers) and removes its
// files.
func (s *server) stop() error {
	if s.tr != nil {
		s.tr.CloseIdleConnections()
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	if err := os.RemoveAll(s.dir); err != nil {
		return fmt.Errorf("remove the S3 server's files: %w", err)
	}
	return nil
}

// removeBucket empties the bucket (its objects and unfinished uploads)
// and removes it.
func (s *server) removeBucket(ctx context.Context, name string) error {
	// A write the test gave up on (its context cancelled mid-upload) may
	// still be committed by the server after the listing: the bucket is
	// then not empty, and emptied again, for a bounded time.
	for tries := 1; ; tries++ {
		err := s.emptyBucket(ctx, name)
		if err == nil {
			err = s.client.RemoveBucket(ctx, name)
		}
		if err == nil || minio.ToErrorResponse(err).Code != "BucketNotEmpty" || tries == 20 {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// emptyBucket removes every object and incomplete upload of bucket name.
func (s *server) emptyBucket(ctx context.Context, name string) error {
	var errs []error
	for o := range s.client.ListObjects(ctx, name, minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			return o.Err
		}
		errs = append(errs, s.client.RemoveObject(ctx, name, o.Key, minio.RemoveObjectOptions{}))
	}
	for u := range s.client.ListIncompleteUploads(ctx, name, "", true) {
		if u.Err != nil {
			return u.Err
		}
		errs = append(errs, s.client.RemoveIncompleteUpload(ctx, name, u.Key))
	}
	return errors.Join(errs...)
}

// freePort returns an address of host no process listens on now.
func freePort(host string) (string, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		return "", err
	}
	return addr, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// lockedBuffer is the server's output, written by exec's copying
// goroutine and read by ready while the server runs.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
