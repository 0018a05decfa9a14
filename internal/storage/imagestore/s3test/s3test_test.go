package s3test

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
)

// A server started for one test takes requests with its keys, gives the
// test an empty bucket, and is gone with its files once the test ends.
func TestStart(t *testing.T) {
	var srv *server
	t.Run("alone", func(t *testing.T) {
		began := time.Now()
		b := Start(t)
		srv = b.srv
		t.Logf("%s@%s: built or found, started, with a bucket, in %v", Module, Version, time.Since(began).Round(time.Millisecond))
		c := b.Client()
		objs := 0
		for o := range c.ListObjects(t.Context(), b.Name, minio.ListObjectsOptions{Recursive: true}) {
			if o.Err != nil {
				t.Fatal(o.Err)
			}
			objs++
		}
		if objs != 0 {
			t.Fatalf("a new bucket has %d objects, want 0", objs)
		}
		want := []byte("hello")
		if _, err := c.PutObject(t.Context(), b.Name, "a/b", bytes.NewReader(want), int64(len(want)), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
		o, err := c.GetObject(t.Context(), b.Name, "a/b", minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = o.Close() }()
		if got, err := io.ReadAll(o); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("read back %q, %v; want %q", got, err, want)
		}
		if s := b.String() + b.GoString(); strings.Contains(s, b.SecretKey) {
			t.Errorf("the bucket's String shows its secret key")
		}
	})
	if srv == nil {
		t.Skip("no server was started")
	}
	if _, err := os.Stat(srv.dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the server's directory is still there after its test: %v", err)
	}
	if c, err := net.Dial("tcp", strings.TrimPrefix(srv.endpoint, "http://")); err == nil {
		c.Close()
		t.Error("the server still takes connections after its test")
	}
	if err := syscall.Kill(srv.cmd.Process.Pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the server's process %d is still there after its test (kill -0: %v)", srv.cmd.Process.Pid, err)
	}
}

// The server's keys are not in its command line, which every process on
// the machine can read.
func TestSecretNotInArgs(t *testing.T) {
	b := Start(t)
	args, err := os.ReadFile("/proc/" + strconv.Itoa(b.srv.cmd.Process.Pid) + "/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(args, []byte(b.SecretKey)) {
		t.Error("the secret key is in the server's command line")
	}
}

// Uploads sees an unfinished multipart upload (so a suite that finds none
// has looked), and a bucket's removal aborts it.
func TestUploads(t *testing.T) {
	b := Start(t)
	id, err := minio.Core{Client: b.Client()}.NewMultipartUpload(t.Context(), b.Name, "a/b", minio.PutObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ups, err := b.Uploads(t.Context())
	if err != nil || len(ups) != 1 || !strings.Contains(ups[0], id) {
		t.Fatalf("Uploads = %v, %v; want the upload %s", ups, err, id)
	}
	if err := b.srv.removeBucket(t.Context(), b.Name); err != nil {
		t.Fatal(err)
	}
	var left []string
	_ = filepath.WalkDir(filepath.Join(b.srv.dir, "data"), func(p string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			left = append(left, p)
		}
		return err
	})
	if len(left) > 0 {
		t.Errorf("files left in the server's directory after the bucket's removal: %v", left)
	}
	// For the cleanup's removal.
	if err := b.Client().MakeBucket(t.Context(), b.Name, minio.MakeBucketOptions{Region: b.Region}); err != nil {
		t.Fatal(err)
	}
}
