package imagestore

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/storage/imagestore/s3test"
)

// A fake secret key, for the checks that no error, string or log shows one.
const testSecret = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}
}

func TestParseS3URL(t *testing.T) {
	t.Parallel()
	good := []struct {
		spec string
		want S3Config
	}{
		{"s3://images", S3Config{Bucket: "images", Endpoint: defaultEndpoint, Region: defaultRegion}},
		{"s3://images/", S3Config{Bucket: "images", Endpoint: defaultEndpoint, Region: defaultRegion}},
		{"s3://images/hutch/prod?region=eu-west-3", S3Config{Bucket: "images", Prefix: "hutch/prod", Endpoint: defaultEndpoint, Region: "eu-west-3"}},
		{"s3://my.bucket-1/p?endpoint=http://127.0.0.1:9000&region=us-east-1",
			S3Config{Bucket: "my.bucket-1", Prefix: "p", Endpoint: "http://127.0.0.1:9000", Region: "us-east-1"}},
		{"s3://bkt/p/?endpoint=https%3A%2F%2Fs3.example.com%2F", S3Config{Bucket: "bkt", Prefix: "p", Endpoint: "https://s3.example.com/", Region: defaultRegion}},
	}
	for _, tt := range good {
		got, err := ParseS3URL(tt.spec)
		if err != nil || got != tt.want {
			t.Errorf("ParseS3URL(%s) = %+v, %v; want %+v", tt.spec, got, err, tt.want)
		}
	}
	bad := []struct {
		spec, says string
	}{
		{"s3://", "names no bucket"},
		{"s3:///prefix", "names no bucket"},
		{"s3://Bad_Bucket/p", "bucket name"},
		{"s3://bucket:9000/p", "?endpoint="},
		{"s3://bkt/../x", "prefix"},
		{"s3://bkt/a//c", "prefix"},
		{"s3://bkt/p?endpoint=ftp://x", "http:// or https://"},
		{"s3://bkt/p?endpoint=127.0.0.1:9000", "http:// or https://"},
		{"s3://bkt/p?endpoint=http://h/path", "path or query"},
		{"s3://bkt/p?region=US_EAST", "region"},
		{"s3://bkt/p?secret=x", "unknown parameter"},
		{"s3://bkt/p?region=a&region=b", "2 times"},
		{"s3://bkt/p#frag", "fragment"},
		{"s3://AKIAEXAMPLE:" + testSecret + "@bkt/p", "carries keys"},
		{"s3://AKIAEXAMPLE:" + testSecret + "/x@bkt/p", "does not parse"}, // a '/' in the secret: not even userinfo
		{"s3://bkt/p?endpoint=http://AKIAEXAMPLE:" + testSecret + "@h:9000", "carries keys"},
		{"s3://bkt/p?endpoint=http://h:9000/" + testSecret, "path or query"},
		{"s3://bkt/p?x=" + testSecret + "%zz", "malformed query"},
	}
	for _, tt := range bad {
		_, err := ParseS3URL(tt.spec)
		if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("ParseS3URL(%s) = %v, want ErrInvalidArgument saying %q", tt.spec, err, tt.says)
		}
		if err != nil && strings.Contains(err.Error(), testSecret) {
			t.Errorf("ParseS3URL(%s)'s error shows the secret: %v", tt.spec, err)
		}
	}
}

// An S3Config printed or logged any way shows no secret.
func TestS3ConfigHidesKeys(t *testing.T) {
	t.Parallel()
	cfg := S3Config{Endpoint: "http://127.0.0.1:9000", Bucket: "b", Region: "us-east-1",
		AccessKey: "AKIAEXAMPLE", SecretKey: testSecret, SessionToken: testSecret + "-token"}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("store", "config", cfg)
	slog.New(slog.NewTextHandler(&logged, nil)).Info("store", "config", cfg)
	for _, s := range []string{fmt.Sprint(cfg), fmt.Sprintf("%v %+v %#v %s", cfg, cfg, cfg, cfg), fmt.Sprintf("%v", &cfg), logged.String()} {
		if strings.Contains(s, testSecret) {
			t.Errorf("shows the secret: %s", s)
		}
		if !strings.Contains(s, "AKIAEXAMPLE") {
			t.Errorf("does not name the access key: %s", s)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keys := env(map[string]string{"AWS_ACCESS_KEY_ID": "AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": testSecret})
	tests := []struct {
		name, spec string
		env        func(string) (string, bool)
		says       string
	}{
		{"empty", "", keys, "no image store given"},
		{"relative", "images", keys, "absolute path"},
		{"dot", "./images", keys, "absolute path"},
		{"unknown scheme", "gs://bucket/p", keys, `unknown scheme "gs"`},
		{"missing dir", filepath.Join(dir, "nfs"), keys, "does not exist"},
		{"file URL of a missing dir", "file://" + filepath.Join(dir, "nfs"), keys, "does not exist"},
		{"file URL with a host", "file://server/export", keys, "on this node"},
		{"file URL without a path", "file://", keys, "no absolute path"},
		{"file URL with a query", "file://" + dir + "?x=1", keys, "path only"},
		{"s3 without keys", "s3://bkt/p", env(nil), "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"},
		{"s3 without the secret key", "s3://bkt/p", env(map[string]string{"AWS_ACCESS_KEY_ID": "AKIAEXAMPLE"}), "set AWS_SECRET_ACCESS_KEY in"},
		{"s3 without the access key", "s3://bkt/p", env(map[string]string{"AWS_SECRET_ACCESS_KEY": testSecret}), "set AWS_ACCESS_KEY_ID in"},
		{"s3 with keys in the URL", "s3://AKIAEXAMPLE:" + testSecret + "@bkt/p", keys, "carries keys"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := open(t.Context(), tt.spec, tt.env)
			if err == nil {
				_ = s.Close()
				t.Fatal("Open succeeded")
			}
			if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("Open(%q) = %v, want ErrInvalidArgument saying %q", tt.spec, err, tt.says)
			}
			if strings.Contains(err.Error(), testSecret) {
				t.Errorf("Open's error shows the secret: %v", err)
			}
		})
	}
}

// Open picks the store from the spec: a path, a file:// URL, an s3:// URL
// with the keys in the environment.
func TestOpen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	specs := map[string]string{"path": dir, "file URL": "file://" + dir, "file URL, localhost": "file://localhost" + dir}
	for name, spec := range specs {
		t.Run(name, func(t *testing.T) {
			s, err := open(t.Context(), spec, env(nil))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = s.Close() }()
			if d, ok := s.(*Dir); !ok || d.path != dir {
				t.Errorf("Open(%s) = %v, want the directory %s", spec, s, dir)
			}
			roundTrip(t, s)
		})
	}
	t.Run("s3", func(t *testing.T) {
		b := s3test.Start(t)
		spec := b.URL("hutch")
		s, err := open(t.Context(), spec, env(map[string]string{"AWS_ACCESS_KEY_ID": b.AccessKey, "AWS_SECRET_ACCESS_KEY": b.SecretKey}))
		if err != nil {
			t.Fatalf("Open(%s): %v", spec, err)
		}
		defer func() { _ = s.Close() }()
		s3, ok := s.(*S3)
		if !ok || s3.cfg.Bucket != b.Name || s3.prefix != "hutch/" || s3.cfg.Endpoint != b.Endpoint {
			t.Fatalf("Open(%s) = %v, want bucket %s, prefix hutch/", spec, s, b.Name)
		}
		if s3.cfg.SecretKey != "" || strings.Contains(fmt.Sprintf("%v %+v %#v", s3, s3, s3), b.SecretKey) {
			t.Error("the store keeps or shows the secret key")
		}
		roundTrip(t, s)
		if _, err := b.Client().StatObject(t.Context(), b.Name, "hutch/x/y", minio.StatObjectOptions{}); err != nil {
			t.Errorf("the blob is not under the URL's prefix: %v", err)
		}
	})
}

func roundTrip(t *testing.T, s Store) {
	t.Helper()
	if err := s.Put(t.Context(), "x/y", strings.NewReader("z")); err != nil {
		t.Fatal(err)
	}
	r, err := s.Get(t.Context(), "x/y")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if b, err := io.ReadAll(r); err != nil || string(b) != "z" {
		t.Errorf("read back %q, %v", b, err)
	}
}
