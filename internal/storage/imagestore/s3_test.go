package imagestore_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/minio/minio-go/v7"
	"go.uber.org/goleak"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/storage/imagestore"
	"github.com/hutchdev/hutch/internal/storage/imagestore/imagestoretest"
	"github.com/hutchdev/hutch/internal/storage/imagestore/s3test"
)

// One S3 server (Versity's gateway, built from the Go module proxy) for
// the package's tests, a bucket each.
func TestMain(m *testing.M) { s3test.Main(m) }

// testPartSize is S3's smallest part, so that the suite's Puts of a few
// MiB already go in several parts.
const testPartSize = 5 << 20

func config(b s3test.Bucket, prefix string, partSize int) imagestore.S3Config {
	return imagestore.S3Config{Endpoint: b.Endpoint, Bucket: b.Name, Prefix: prefix, Region: b.Region,
		AccessKey: b.AccessKey, SecretKey: b.SecretKey, PartSize: partSize}
}

func openS3(t *testing.T, cfg imagestore.S3Config) *imagestore.S3 {
	t.Helper()
	s, err := imagestore.OpenS3(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// The Store's contract, on a real S3 server.
func TestS3(t *testing.T) {
	t.Parallel()
	s3test.Require(t)
	var buckets sync.Map // of each store's bucket
	imagestoretest.Run(t, imagestoretest.Harness{
		Open: func(t *testing.T) imagestore.Store {
			b := s3test.Start(t)
			s := openS3(t, config(b, "hutch/images", testPartSize))
			buckets.Store(s, b)
			return s
		},
		// Unfinished multipart uploads, which S3 keeps until aborted.
		Leftovers: func(t *testing.T, s imagestore.Store) []string {
			b, _ := buckets.Load(s)
			ups, err := b.(s3test.Bucket).Uploads(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			return ups
		},
		PartSize: testPartSize,
	})
}

// Blobs that end exactly at a part's end, with the default part size: the
// last read finds nothing, and sends no empty part.
func TestS3PartBoundaries(t *testing.T) {
	t.Parallel()
	b := s3test.Start(t)
	s := openS3(t, config(b, "", 0))
	for _, size := range []int64{imagestore.DefaultPartSize - 1, imagestore.DefaultPartSize, 2 * imagestore.DefaultPartSize} {
		sent := sha256.New()
		src := io.LimitReader(rand.NewChaCha8([32]byte{byte(size)}), size)
		if err := s.Put(t.Context(), "blob", io.TeeReader(src, sent)); err != nil {
			t.Fatalf("Put of %d bytes: %v", size, err)
		}
		r, err := s.Get(t.Context(), "blob")
		if err != nil {
			t.Fatal(err)
		}
		got := sha256.New()
		n, err := io.Copy(got, r)
		r.Close()
		if err != nil || n != size || !bytes.Equal(got.Sum(nil), sent.Sum(nil)) {
			t.Errorf("a blob of %d bytes read back as %d bytes (%v), same hash: %v", size, n, err, bytes.Equal(got.Sum(nil), sent.Sum(nil)))
		}
	}
	if ups, err := b.Uploads(t.Context()); err != nil || len(ups) > 0 {
		t.Errorf("unfinished uploads: %v, %v", ups, err)
	}
}

// A store keeps to its prefix: its objects are under it, another prefix's
// are not its, and objects that no store made (names it would refuse) are
// passed over.
func TestS3Prefix(t *testing.T) {
	t.Parallel()
	b := s3test.Start(t)
	one := openS3(t, config(b, "one", 0))
	two := openS3(t, config(b, "two/deeper", 0))
	if err := one.Put(t.Context(), "a/b", strings.NewReader("1")); err != nil {
		t.Fatal(err)
	}
	if err := two.Put(t.Context(), "a/b", strings.NewReader("2")); err != nil {
		t.Fatal(err)
	}
	c := b.Client()
	for _, key := range []string{"one/a/b", "two/deeper/a/b"} {
		if _, err := c.StatObject(t.Context(), b.Name, key, minio.StatObjectOptions{}); err != nil {
			t.Errorf("object %s: %v", key, err)
		}
	}
	if _, err := c.PutObject(t.Context(), b.Name, "one/.odd/x", strings.NewReader("x"), 1, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	infos, err := one.List(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].Name != "a/b" {
		t.Errorf("List of one = %+v, want a/b alone", infos)
	}
	r, err := two.Get(t.Context(), "a/b")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got, _ := io.ReadAll(r); string(got) != "2" {
		t.Errorf("two's a/b = %q, want 2", got)
	}
}

// A bucket that is gone is an error, not "no image": a caller must not
// take a store set up wrong for a sandbox that has no image.
func TestS3BucketGone(t *testing.T) {
	t.Parallel()
	b := s3test.Start(t)
	s := openS3(t, config(b, "", 0))
	if err := b.Client().RemoveBucket(t.Context(), b.Name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // for s3test's cleanup to remove
		_ = b.Client().MakeBucket(context.Background(), b.Name, minio.MakeBucketOptions{Region: b.Region})
	})
	if _, err := s.Stat(t.Context(), "x"); err == nil || errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Stat in a bucket that is gone = %v, want an error other than ErrNotFound", err)
	}
	if r, err := s.Get(t.Context(), "x"); err == nil || errors.Is(err, errdefs.ErrNotFound) {
		if r != nil {
			r.Close()
		}
		t.Errorf("Get in a bucket that is gone = %v, want an error other than ErrNotFound", err)
	}
}

// OpenS3 says what is wrong, never with the secret key.
func TestOpenS3Errors(t *testing.T) {
	t.Parallel()
	b := s3test.Start(t)
	const wrongSecret = "wrong-secret-key-that-must-not-show"
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close() // nothing listens there now
	tests := []struct {
		name   string
		change func(*imagestore.S3Config)
		kind   error
		says   string
	}{
		{"wrong secret key", func(c *imagestore.S3Config) { c.SecretKey = wrongSecret }, errdefs.ErrInvalidArgument, "refused the keys"},
		{"unknown access key", func(c *imagestore.S3Config) { c.AccessKey, c.SecretKey = "nobody", wrongSecret }, errdefs.ErrInvalidArgument, "refused the keys"},
		{"no such bucket", func(c *imagestore.S3Config) { c.Bucket = "no-such-bucket" }, errdefs.ErrInvalidArgument, "no bucket no-such-bucket"},
		{"no keys", func(c *imagestore.S3Config) { c.AccessKey, c.SecretKey = "", "" }, errdefs.ErrInvalidArgument, "AWS_ACCESS_KEY_ID"},
		{"nothing listens", func(c *imagestore.S3Config) { c.Endpoint, c.SecretKey = "http://"+deadAddr, wrongSecret }, errdefs.ErrUnavailable, "does not answer"},
		{"part too small", func(c *imagestore.S3Config) { c.PartSize = 1 << 20 }, errdefs.ErrInvalidArgument, "part size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config(b, "", 0)
			tt.change(&cfg)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			s, err := imagestore.OpenS3(ctx, cfg)
			if err == nil {
				_ = s.Close()
				t.Fatal("OpenS3 succeeded")
			}
			if !errors.Is(err, tt.kind) || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("OpenS3 = %v, want %v saying %q", err, tt.kind, tt.says)
			}
			if strings.Contains(err.Error(), wrongSecret) || strings.Contains(err.Error(), b.SecretKey) {
				t.Errorf("OpenS3's error shows a secret key: %v", err)
			}
		})
	}
}

// Only the store's own names are listed, in order, whatever the server's
// order of a prefix's many objects.
func TestS3ListMany(t *testing.T) {
	t.Parallel()
	b := s3test.Start(t)
	s := openS3(t, config(b, "p", 0))
	var want []string
	for i := range 1100 { // past one page of a listing (1,000 keys)
		want = append(want, fmt.Sprintf("sandboxes/s%d/%d/upper", i%7, i))
	}
	ctx := t.Context()
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for _, n := range want {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := s.Put(ctx, n, strings.NewReader("x")); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	slices.Sort(want)
	infos, err := s.List(ctx, "sandboxes/")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, i := range infos {
		got = append(got, i.Name)
	}
	if !slices.Equal(got, want) {
		t.Errorf("List gave %d names, want %d in order", len(got), len(want))
	}
}

// A store leaves no goroutine behind once closed: not its listings', not
// its connections'. Not parallel, so that no other test's goroutines come
// and go meanwhile.
func TestS3NoGoroutineLeft(t *testing.T) {
	b := s3test.Start(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	s, err := imagestore.OpenS3(t.Context(), config(b, "", testPartSize))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	ctx := t.Context()
	for i, size := range []int64{10, testPartSize + 10} {
		if err := s.Put(ctx, fmt.Sprintf("blob-%d", i), io.LimitReader(rand.NewChaCha8([32]byte{}), size)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Put(ctx, "failed", io.MultiReader(io.LimitReader(rand.NewChaCha8([32]byte{}), testPartSize+10), iotest.ErrReader(errors.New("broken")))); err == nil {
		t.Fatal("a Put whose reader fails succeeded")
	}
	r, err := s.Get(ctx, "blob-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(r, make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	r.Close() // half read
	if _, err := s.List(ctx, ""); err != nil {
		t.Fatal(err)
	}
}
