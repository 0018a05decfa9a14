// Package imagestore keeps suspended sandboxes' images (a writable layer's
// archive, a gVisor memory image) in a store that several nodes share, so
// that a sandbox suspended on one node can resume on another when its own
// is gone or full (issue #23, scale-out).
//
// Two stores satisfy Store: Dir, a directory that the nodes mount alike
// (NFS, say), and S3, a bucket of an S3-compatible server. Open picks one
// from a spec: a path or a file:// URL for a directory, an s3:// URL for a
// bucket.
//
// Blobs are streamed both ways, never held whole in memory: a memory image
// is gigabytes. A blob appears whole or not at all: a reader never sees one
// half-written, and a Put that fails or is cancelled leaves nothing behind
// (no temporary file, no unfinished multipart upload) save when the node
// dies in the middle of it.
package imagestore

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// Store is a store of named blobs. Names are slash-separated paths, such as
// "sandboxes/<id>/<generation>/upper.tar.zst"; ValidName says which are
// allowed. A name must not also be the directory of another name: a
// directory cannot hold both "a/b" and "a/b/c".
//
// Every method is safe for concurrent use, from one process and from
// several nodes at once. Two Puts of one name at once each write a whole
// blob; the one that finishes last is the one readers get.
type Store interface {
	// Put stores what r yields, up to its io.EOF, as name, replacing any
	// blob of that name. The blob appears, whole, only when Put returns
	// nil; until then a Get of name gets the blob it replaces or
	// ErrNotFound. When r fails, or ctx ends, Put returns an error (which
	// wraps r's or ctx's) and leaves nothing behind. Put does not interrupt
	// a Read of r that blocks: r should end when ctx does.
	Put(ctx context.Context, name string, r io.Reader) error
	// Get returns a reader of the blob name, which the caller closes. It
	// reads the blob as it was when Get was called, however it is replaced
	// or deleted meanwhile. Its reads fail once ctx ends. A name that
	// holds no blob is errdefs.ErrNotFound.
	Get(ctx context.Context, name string) (io.ReadCloser, error)
	// Stat returns what is known of the blob name without reading it;
	// errdefs.ErrNotFound when there is none.
	Stat(ctx context.Context, name string) (Info, error)
	// List returns the blobs whose names begin with prefix (a string
	// prefix, as in S3: "sandboxes/ab" matches "sandboxes/abc/1/x"),
	// ordered by name. An empty prefix lists every blob.
	List(ctx context.Context, prefix string) ([]Info, error)
	// Delete removes the blob name. A name that holds none is no error.
	Delete(ctx context.Context, name string) error
	// Close releases what the store holds open. Blobs being read through
	// Get's readers are not affected.
	Close() error
}

// Info describes one blob.
type Info struct {
	Name    string
	Size    int64
	ModTime time.Time
}

// Name limits. A segment is one path element, which a file system takes
// as a file name (NAME_MAX is 255); S3 allows keys of 1,024 bytes, which
// the S3 store's prefix shares. Hutch's names are a few segments deep; a
// much deeper one is a mistake, which would cost the directory store a
// directory, and an fsync of it, per segment.
const (
	maxNameLen    = 512
	maxSegmentLen = 255
	maxSegments   = 16
)

// ValidName returns nil when name can name a blob, and otherwise an
// errdefs.ErrInvalidArgument error that says why. A name is one or more
// segments joined by "/"; a segment is letters, digits, '.', '_' and '-',
// and does not begin with '.'. So no name is absolute, none climbs out
// with "..", none is empty, and none can be mistaken for the dot files the
// directory store writes blobs to before they are whole.
func ValidName(name string) error {
	if name == "" {
		return errdefs.InvalidArgument("an image name is empty")
	}
	if len(name) > maxNameLen {
		return errdefs.InvalidArgument("image name %.40q… is %d bytes long; at most %d are allowed", name, len(name), maxNameLen)
	}
	if n := strings.Count(name, "/") + 1; n > maxSegments {
		return errdefs.InvalidArgument("image name %.40q… has %d segments; at most %d are allowed", name, n, maxSegments)
	}
	for seg := range strings.SplitSeq(name, "/") {
		if err := validSegment(seg); err != nil {
			return errdefs.InvalidArgument("image name %q: %s", name, err)
		}
	}
	return nil
}

// validPrefix checks the prefix of a List: empty, or a valid name, or a
// valid name followed by "/", or such a one followed by the beginning of
// a segment.
func validPrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if len(prefix) > maxNameLen {
		return errdefs.InvalidArgument("image name prefix %.40q… is %d bytes long; at most %d are allowed", prefix, len(prefix), maxNameLen)
	}
	segs := strings.Split(prefix, "/")
	if len(segs) > maxSegments+1 || len(segs) == maxSegments+1 && segs[maxSegments] != "" {
		return errdefs.InvalidArgument("image name prefix %.40q… has %d segments; names have at most %d", prefix, len(segs), maxSegments)
	}
	for i, seg := range segs {
		if seg == "" && i == len(segs)-1 {
			break // "a/b/": everything in a/b
		}
		if err := validSegment(seg); err != nil {
			return errdefs.InvalidArgument("image name prefix %q: %s", prefix, err)
		}
	}
	return nil
}

// validSegment says what is wrong with one segment of a name, as a phrase.
func validSegment(seg string) error {
	switch {
	case seg == "":
		return fmt.Errorf("it has an empty segment (a leading, trailing or double '/')")
	case len(seg) > maxSegmentLen:
		return fmt.Errorf("a segment is %d bytes long; at most %d are allowed", len(seg), maxSegmentLen)
	case seg[0] == '.':
		return fmt.Errorf("segment %q begins with '.'", seg)
	}
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("segment %q has %q; only letters, digits, '.', '_' and '-' are allowed", seg, c)
		}
	}
	return nil
}

// Open opens the store that spec names:
//
//   - an absolute path, or a file:// URL of one (file:///mnt/images): a
//     directory, which must exist (a missing shared mount must not turn
//     into a local directory that no other node sees);
//   - s3://bucket[/prefix][?endpoint=URL&region=NAME]: a bucket, with the
//     keys in the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
//     and AWS_SESSION_TOKEN for temporary ones); see ParseS3URL.
//
// Open checks that the store can be used (the directory is writable; the
// bucket exists and takes the keys), so that a daemon with a wrong spec
// fails at start and not at its first suspend. A spec it cannot use is
// errdefs.ErrInvalidArgument, with a message that says what to change.
func Open(ctx context.Context, spec string) (Store, error) {
	return open(ctx, spec, os.LookupEnv)
}

// open is Open with the environment given, for tests.
func open(ctx context.Context, spec string, lookupEnv func(string) (string, bool)) (Store, error) {
	scheme, _, hasScheme := strings.Cut(spec, "://")
	switch {
	case spec == "":
		return nil, errdefs.InvalidArgument("no image store given: name a directory (/mnt/hutch-images, or file:///mnt/hutch-images) or an S3 bucket (s3://bucket/prefix?endpoint=https://s3.example.com&region=us-east-1)")
	case !hasScheme:
		if !filepath.IsAbs(spec) {
			return nil, errdefs.InvalidArgument("image store %q: a directory must be given as an absolute path (or a file:// URL); an S3 bucket as s3://bucket/prefix", spec)
		}
		return OpenDir(spec)
	case scheme == "file":
		dir, err := parseFileURL(spec)
		if err != nil {
			return nil, err
		}
		return OpenDir(dir)
	case scheme == "s3":
		cfg, err := ParseS3URL(spec)
		if err != nil {
			return nil, err
		}
		if err := cfg.credentialsFrom(lookupEnv); err != nil {
			return nil, err
		}
		return OpenS3(ctx, cfg)
	default:
		return nil, errdefs.InvalidArgument("image store: unknown scheme %q: use a directory (/path or file:///path) or an S3 bucket (s3://bucket/prefix)", scheme)
	}
}

// parseFileURL returns the directory of a file:// URL.
func parseFileURL(spec string) (string, error) {
	u, err := url.Parse(spec)
	if err != nil {
		return "", errdefs.InvalidArgument("image store %q is not a valid URL: write file:///absolute/path", spec)
	}
	if u.Host != "" && u.Host != "localhost" {
		return "", errdefs.InvalidArgument("image store %q: a file:// URL names a directory on this node (file:///path); a shared directory is one mounted on every node", spec)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", errdefs.InvalidArgument("image store %q: a file:// URL takes a path only (file:///path)", spec)
	}
	if u.Path == "" || !filepath.IsAbs(u.Path) {
		return "", errdefs.InvalidArgument("image store %q: no absolute path; write file:///absolute/path", spec)
	}
	return u.Path, nil
}
