package imagestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/s3utils"

	"github.com/hutchdev/hutch/internal/base/ctxio"
	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// S3 is a Store in a bucket of an S3-compatible server (AWS S3, MinIO,
// Ceph RGW, SeaweedFS, Versity's gateway, …), through minio-go, addressed
// path-style (http://endpoint/bucket/key), which every such server takes.
//
// A blob is an object. One smaller than a part is sent in one PUT; a
// larger one as a multipart upload, a part at a time from one buffer, so
// that a Put holds one part in memory whatever the blob's size. S3 makes
// an object visible only once its PUT or its upload's completion is done,
// so readers never see part of one; a Put that fails aborts its upload.
type S3 struct {
	core     minio.Core
	tr       *http.Transport
	cfg      S3Config // without the keys: see OpenS3
	prefix   string   // cfg.Prefix with a trailing "/", or ""
	partSize int
	bufs     sync.Pool // of *[]byte of partSize
}

var _ Store = (*S3)(nil)

// Part sizes. S3 takes parts of 5 MiB to 5 GiB, and 10,000 of them at
// most: with 16 MiB parts a blob may be 156 GiB, which a sandbox's memory
// image or writable layer does not reach, and a Put holds 16 MiB.
const (
	DefaultPartSize = 16 << 20
	minPartSize     = 5 << 20
	maxPartSize     = int64(5 << 30) // typed: more than a 32-bit int holds
	maxParts        = 10000
)

// The defaults of an s3:// URL.
const (
	defaultEndpoint = "https://s3.amazonaws.com"
	defaultRegion   = "us-east-1"
)

// abortTimeout bounds the abort of a failed upload, which runs after the
// Put's own context may have ended.
const abortTimeout = time.Minute

// S3Config says where an S3 store is and how to reach it. Its String,
// GoString and LogValue leave the keys out, so that printing or logging
// one shows no secret.
type S3Config struct {
	// Endpoint is the server's URL, scheme and host only:
	// http://127.0.0.1:9000, https://s3.example.com.
	Endpoint string
	Bucket   string
	// Prefix is put before every name ("hutch" stores "hutch/<name>");
	// empty for none.
	Prefix string
	Region string
	// The keys. OpenS3 needs AccessKey and SecretKey; SessionToken is for
	// temporary keys.
	AccessKey, SecretKey, SessionToken string
	// PartSize is the size of the parts of a multipart upload, and so of
	// the buffer a Put holds; 0 is DefaultPartSize.
	PartSize int
}

// ParseS3URL reads an S3 store's spec:
//
//	s3://bucket[/prefix][?endpoint=URL&region=NAME]
//
// endpoint defaults to AWS (https://s3.amazonaws.com), region to
// us-east-1. It never reads keys from the URL (they would end up in
// configuration files, process listings and logs): they come from the
// environment (see Open), and a URL that carries some is refused. Its
// errors do not repeat the URL, in case it does.
func ParseS3URL(spec string) (S3Config, error) {
	const form = "s3://bucket/prefix?endpoint=https://s3.example.com&region=us-east-1"
	u, err := url.Parse(spec)
	if err != nil || u.Scheme != "s3" || u.Opaque != "" {
		return S3Config{}, errdefs.InvalidArgument("the S3 image store's URL does not parse: write %s", form)
	}
	if u.User != nil {
		return S3Config{}, errdefs.InvalidArgument("the S3 image store's URL carries keys: take them out of it, and set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the daemon's environment instead")
	}
	if u.Fragment != "" {
		return S3Config{}, errdefs.InvalidArgument("the S3 image store's URL has a fragment ('#…'): write %s", form)
	}
	cfg := S3Config{Bucket: u.Host, Prefix: strings.Trim(u.Path, "/"), Endpoint: defaultEndpoint, Region: defaultRegion}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return S3Config{}, errdefs.InvalidArgument("the S3 image store's URL has a malformed query: write %s", form)
	}
	for k, vs := range q {
		if len(vs) != 1 {
			return S3Config{}, errdefs.InvalidArgument("the S3 image store's URL gives %s %d times; give it once", k, len(vs))
		}
		switch k {
		case "endpoint":
			cfg.Endpoint = vs[0]
		case "region":
			cfg.Region = vs[0]
		default:
			return S3Config{}, errdefs.InvalidArgument("the S3 image store's URL has an unknown parameter %q: it takes endpoint and region", k)
		}
	}
	if _, err := cfg.check(); err != nil {
		return S3Config{}, err
	}
	return cfg, nil
}

// credentialsFrom sets the keys from the environment.
func (c *S3Config) credentialsFrom(lookupEnv func(string) (string, bool)) error {
	c.AccessKey, _ = lookupEnv("AWS_ACCESS_KEY_ID")
	c.SecretKey, _ = lookupEnv("AWS_SECRET_ACCESS_KEY")
	c.SessionToken, _ = lookupEnv("AWS_SESSION_TOKEN")
	var missing []string
	if c.AccessKey == "" {
		missing = append(missing, "AWS_ACCESS_KEY_ID")
	}
	if c.SecretKey == "" {
		missing = append(missing, "AWS_SECRET_ACCESS_KEY")
	}
	if len(missing) > 0 {
		return errdefs.InvalidArgument("the S3 image store needs keys: set %s in the daemon's environment", strings.Join(missing, " and "))
	}
	return nil
}

// check validates the configuration, keys aside, and returns the
// endpoint's URL.
func (c S3Config) check() (*url.URL, error) {
	if c.Bucket == "" {
		return nil, errdefs.InvalidArgument("the S3 image store names no bucket: write s3://bucket/prefix")
	}
	if err := s3utils.CheckValidBucketNameStrict(c.Bucket); err != nil {
		return nil, errdefs.InvalidArgument("S3 bucket name %q: %v (a server's address goes in ?endpoint=)", c.Bucket, err)
	}
	if c.Prefix != "" {
		if err := ValidName(c.Prefix); err != nil {
			return nil, errdefs.Prefix(err, "the S3 image store's prefix")
		}
	}
	e, err := url.Parse(c.Endpoint)
	switch {
	case err != nil || e.Host == "" || (e.Scheme != "http" && e.Scheme != "https"):
		return nil, errdefs.InvalidArgument("the S3 endpoint is not an http:// or https:// URL with a host, such as https://s3.example.com or http://127.0.0.1:9000")
	case e.User != nil:
		return nil, errdefs.InvalidArgument("the S3 endpoint carries keys: take them out of it, and set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the daemon's environment instead")
	case (e.Path != "" && e.Path != "/") || e.RawQuery != "" || e.Fragment != "":
		// Only the scheme and host are shown: what follows could be anything.
		return nil, errdefs.InvalidArgument("the S3 endpoint %s://%s… has a path or query: give its scheme and host only (buckets are addressed path-style, endpoint/bucket/key)", e.Scheme, e.Host)
	}
	if c.Region == "" || strings.Trim(c.Region, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
		return nil, errdefs.InvalidArgument("S3 region %q is not a region name such as us-east-1", c.Region)
	}
	if c.PartSize != 0 && (c.PartSize < minPartSize || int64(c.PartSize) > maxPartSize) {
		return nil, errdefs.InvalidArgument("S3 part size %d is outside S3's limits (5 MiB to 5 GiB)", c.PartSize)
	}
	return e, nil
}

// String describes the store, without its keys.
func (c S3Config) String() string {
	s := "s3://" + c.Bucket + "/" + c.Prefix + " at " + c.Endpoint + " (" + c.Region + ")"
	if c.AccessKey != "" {
		s += ", access key " + c.AccessKey
	}
	return s
}

// GoString is String, for %#v.
func (c S3Config) GoString() string { return "imagestore.S3Config{" + c.String() + "}" }

// LogValue is what slog logs of it: no secret.
func (c S3Config) LogValue() slog.Value {
	return slog.GroupValue(slog.String("endpoint", c.Endpoint), slog.String("bucket", c.Bucket),
		slog.String("prefix", c.Prefix), slog.String("region", c.Region), slog.String("access_key", c.AccessKey))
}

// OpenS3 connects to the bucket and checks that it exists and takes the
// keys.
func OpenS3(ctx context.Context, cfg S3Config) (*S3, error) {
	endpoint, err := cfg.check()
	if err != nil {
		return nil, err
	}
	if cfg.AccessKey == "" || cfg.SecretKey == "" {
		return nil, errdefs.InvalidArgument("the S3 image store needs keys: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the daemon's environment")
	}
	if cfg.PartSize == 0 {
		cfg.PartSize = DefaultPartSize
	}
	secure := endpoint.Scheme == "https"
	tr, err := minio.DefaultTransport(secure)
	if err != nil {
		return nil, fmt.Errorf("S3 transport: %w", err)
	}
	client, err := minio.New(endpoint.Host, &minio.Options{
		Creds:        credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, cfg.SessionToken),
		Secure:       secure,
		Region:       cfg.Region, // given, so that no request asks the bucket's
		BucketLookup: minio.BucketLookupPath,
		Transport:    tr,
		// Each retry of a failed request waits longer (up to a second):
		// a few ride out a server's restart without holding a Put for long.
		MaxRetries: 5,
	})
	if err != nil {
		return nil, errdefs.InvalidArgument("the S3 endpoint %s://%s: %v", endpoint.Scheme, endpoint.Host, err)
	}
	// The keys are the client's now; the store keeps the rest.
	cfg.AccessKey, cfg.SecretKey, cfg.SessionToken = "", "", ""
	s := &S3{core: minio.Core{Client: client}, tr: tr, cfg: cfg, partSize: cfg.PartSize}
	if cfg.Prefix != "" {
		s.prefix = cfg.Prefix + "/"
	}
	s.bufs.New = func() any {
		b := make([]byte, s.partSize)
		return &b
	}
	if err := s.probe(ctx); err != nil {
		tr.CloseIdleConnections()
		return nil, err
	}
	return s, nil
}

// probe checks that the bucket is there and that the server takes the
// keys, by listing (at most) one object under the prefix: a GET, whose
// error has a body that says what is wrong, where a HEAD of the bucket's
// has only a status (Versity's gateway answers an unknown access key with
// a 404, which a HEAD would report as a missing bucket).
func (s *S3) probe(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the listing after its first answer
	var err error
	for o := range s.core.Client.ListObjects(ctx, s.cfg.Bucket, minio.ListObjectsOptions{Prefix: s.prefix, MaxKeys: 1}) {
		err = o.Err
		break
	}
	if err == nil {
		return nil
	}
	var resp minio.ErrorResponse
	if errors.As(err, &resp) {
		switch {
		case resp.Code == "NoSuchBucket":
			return errdefs.InvalidArgument("there is no bucket %s at %s: create it first", s.cfg.Bucket, s.cfg.Endpoint)
		case resp.StatusCode == http.StatusForbidden || slices.Contains(refusedKeys, resp.Code):
			return errdefs.InvalidArgument("the S3 server at %s refused the keys for bucket %s (%s): check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", s.cfg.Endpoint, s.cfg.Bucket, resp.Code)
		default:
			return errdefs.InvalidArgument("the S3 server at %s refused to list bucket %s: %s (%s)", s.cfg.Endpoint, s.cfg.Bucket, resp.Message, resp.Code)
		}
	}
	if ctx.Err() != nil {
		return fmt.Errorf("reach the S3 server at %s: %w", s.cfg.Endpoint, err)
	}
	return errdefs.Unavailable("the S3 server at %s does not answer: %v", s.cfg.Endpoint, err)
}

// refusedKeys are the codes of S3's answers to keys it does not take; the
// last is Versity's gateway's for an access key it does not know.
var refusedKeys = []string{"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken",
	"ExpiredToken", "TokenRefreshRequired", "XAdminUserNotFound"}

// String names the store for logs.
func (s *S3) String() string { return s.cfg.String() }

// GoString is String: %#v would print the client, which holds the keys.
func (s *S3) GoString() string { return "imagestore.S3{" + s.cfg.String() + "}" }

// Close lets go of the idle connections to the server.
func (s *S3) Close() error {
	s.tr.CloseIdleConnections()
	return nil
}

func (s *S3) key(name string) string { return s.prefix + name }

// Put sends a blob that ends within the first part in one PUT, and a
// larger one as a multipart upload.
func (s *S3) Put(ctx context.Context, name string, r io.Reader) (err error) {
	if err := ValidName(name); err != nil {
		return err
	}
	bp := s.bufs.Get().(*[]byte)
	defer func() {
		// After a failed request the HTTP transport may still be reading
		// the body it was given (http.RoundTripper's contract): such a
		// buffer is left to the garbage collector, not used again.
		if err == nil {
			s.bufs.Put(bp)
		}
	}()
	buf := *bp
	r = ctxio.Reader(ctx, r)
	n, err := io.ReadFull(r, buf)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		opts := minio.PutObjectOptions{ContentType: "application/octet-stream"}
		if _, err := s.core.PutObject(ctx, s.cfg.Bucket, s.key(name), bytes.NewReader(buf[:n]), int64(n), "", "", opts); err != nil {
			return fmt.Errorf("put %s: %w", name, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("put %s: %w", name, err)
	}
	return s.putMultipart(ctx, name, r, buf)
}

// putMultipart uploads buf, which is full, and the rest of r as parts of
// one upload, and aborts the upload when anything fails, so that neither
// an object nor an unfinished upload (whose parts S3 keeps, and bills,
// until someone aborts it) is left.
func (s *S3) putMultipart(ctx context.Context, name string, r io.Reader, buf []byte) (err error) {
	key := s.key(name)
	opts := minio.PutObjectOptions{ContentType: "application/octet-stream"}
	id, err := s.core.NewMultipartUpload(ctx, s.cfg.Bucket, key, opts)
	if err != nil {
		return fmt.Errorf("put %s: start upload: %w", name, err)
	}
	defer func() {
		if err == nil {
			return
		}
		// Under its own deadline: ctx may be why the upload failed.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
		defer cancel()
		if aerr := s.core.AbortMultipartUpload(actx, s.cfg.Bucket, key, id); aerr != nil {
			err = errors.Join(err, fmt.Errorf("abort the upload of %s (upload ID %s is left unfinished on the server): %w", name, id, aerr))
		}
	}()
	var parts []minio.CompletePart
	n := len(buf)
	for number := 1; ; number++ {
		if number > maxParts {
			return errdefs.TooLarge("image %s is larger than S3 takes in parts of %d bytes (%d parts)", name, s.partSize, maxParts)
		}
		part, err := s.core.PutObjectPart(ctx, s.cfg.Bucket, key, id, number, bytes.NewReader(buf[:n]), int64(n), minio.PutObjectPartOptions{})
		if err != nil {
			return fmt.Errorf("put %s: part %d: %w", name, number, err)
		}
		parts = append(parts, minio.CompletePart{PartNumber: number, ETag: part.ETag})
		var rerr error
		n, rerr = io.ReadFull(r, buf)
		if rerr == io.EOF {
			break // the blob ended with the last part
		}
		if rerr != nil && rerr != io.ErrUnexpectedEOF {
			return fmt.Errorf("put %s: %w", name, rerr)
		}
	}
	// The upload's last chance to be given up: its completion makes the
	// object appear.
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put %s: %w", name, err)
	}
	if _, err := s.core.CompleteMultipartUpload(ctx, s.cfg.Bucket, key, id, parts, opts); err != nil {
		return fmt.Errorf("put %s: complete upload: %w", name, err)
	}
	return nil
}

// Get returns the body of a GET of the object: one response, so the one
// object it was when Get was called.
func (s *S3) Get(ctx context.Context, name string) (io.ReadCloser, error) {
	if err := ValidName(name); err != nil {
		return nil, err
	}
	body, _, _, err := s.core.GetObject(ctx, s.cfg.Bucket, s.key(name), minio.GetObjectOptions{})
	if err != nil {
		return nil, s.error("get", name, err)
	}
	// The transport ends the response when ctx ends, but from another
	// goroutine, while what the socket holds (megabytes, on loopback) can
	// still be read: each read checks ctx first, as the directory's do.
	return &s3Reader{Reader: ctxio.Reader(ctx, body), body: body}, nil
}

// s3Reader is a response's body, whose reads fail once the context of the
// Get has ended.
type s3Reader struct {
	io.Reader
	body io.ReadCloser
}

func (r *s3Reader) Close() error { return r.body.Close() }

// Stat asks for the object's head.
func (s *S3) Stat(ctx context.Context, name string) (Info, error) {
	if err := ValidName(name); err != nil {
		return Info{}, err
	}
	o, err := s.core.StatObject(ctx, s.cfg.Bucket, s.key(name), minio.StatObjectOptions{})
	if err != nil {
		err = s.error("stat", name, err)
		if errors.Is(err, errdefs.ErrNotFound) {
			// A HEAD's 404 has no body to tell a missing object from a
			// missing bucket; the bucket's own HEAD does.
			ok, berr := s.core.BucketExists(ctx, s.cfg.Bucket)
			switch {
			case berr != nil:
				return Info{}, fmt.Errorf("stat %s: %w", name, berr)
			case !ok:
				return Info{}, fmt.Errorf("stat %s: %w", name, s.bucketGone())
			}
		}
		return Info{}, err
	}
	return Info{Name: name, Size: o.Size, ModTime: o.LastModified}, nil
}

// List lists the objects under the store's prefix and prefix. Objects
// whose names are not valid ones (put there by something else) are passed
// over.
func (s *S3) List(ctx context.Context, prefix string) ([]Info, error) {
	if err := validPrefix(prefix); err != nil {
		return nil, err
	}
	// Cancelled on return, which ends the listing's goroutine when the
	// loop stops early.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var infos []Info
	for o := range s.core.Client.ListObjects(ctx, s.cfg.Bucket, minio.ListObjectsOptions{Prefix: s.key(prefix), Recursive: true}) {
		if o.Err != nil {
			return nil, fmt.Errorf("list %q: %w", prefix, o.Err)
		}
		name := strings.TrimPrefix(o.Key, s.prefix)
		if ValidName(name) != nil {
			continue
		}
		infos = append(infos, Info{Name: name, Size: o.Size, ModTime: o.LastModified})
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list %q: %w", prefix, err)
	}
	slices.SortFunc(infos, func(a, b Info) int { return strings.Compare(a.Name, b.Name) })
	return infos, nil
}

// Delete removes the object; S3 answers a DELETE of an absent one with
// success.
func (s *S3) Delete(ctx context.Context, name string) error {
	if err := ValidName(name); err != nil {
		return err
	}
	if err := s.core.RemoveObject(ctx, s.cfg.Bucket, s.key(name), minio.RemoveObjectOptions{}); err != nil {
		if err := s.error("delete", name, err); errors.Is(err, errdefs.ErrNotFound) {
			return nil
		}
		return fmt.Errorf("delete %s: %w", name, err)
	}
	return nil
}

// bucketGone is the error of a request to a bucket that is not there.
func (s *S3) bucketGone() error {
	return fmt.Errorf("there is no bucket %s at %s", s.cfg.Bucket, s.cfg.Endpoint)
}

// error makes err, from a request about name, ErrNotFound when the server
// says there is no such object. A missing bucket is not that: it is a
// store set up wrong, or taken away, which a caller must not read as "no
// image".
func (s *S3) error(op, name string, err error) error {
	var resp minio.ErrorResponse
	if errors.As(err, &resp) && resp.Code != "NoSuchBucket" &&
		(resp.Code == "NoSuchKey" || resp.StatusCode == http.StatusNotFound) {
		return notFound(name)
	}
	return fmt.Errorf("%s %s: %w", op, name, err)
}
