package rootfs

// Templates from OCI images: pulled from a registry, or imported from a
// docker-archive (docker save) or OCI layout tarball, with
// go-containerregistry. The image's layers are flattened (whiteouts
// applied) into the root, which then gets what every template has: the
// sandbox user, its workspace, and the mount points Hutch binds over.

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/hutchdev/hutch/internal/base/ctxio"
	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// SourceImage marks a template made from an OCI image.
const SourceImage = "image"

// platform is the only one sandboxes run.
var platform = v1.Platform{OS: "linux", Architecture: "amd64"}

// PullImage makes name from the image ref in a registry (docker.io/library/
// alpine:3.20, 127.0.0.1:5000/app@sha256:…), at any address: the
// administrator's pulls. maxBytes, when not 0, bounds what its layers
// unpack to: past it the pull stops (errdefs.ErrResourceExhausted) and
// leaves nothing.
func (s *Store) PullImage(ctx context.Context, name, ref string, maxBytes int64, progress func(Progress)) (Info, error) {
	return s.pull(ctx, name, ref, remote.DefaultTransport, maxBytes, progress)
}

// PullPublicImage is PullImage from a registry at public addresses only:
// a workspace's pulls, which must not reach the host's own networks
// (loopback, private ranges, cloud metadata) through the daemon. Every
// address a connection goes to is checked as it is dialled, a redirect's
// too.
func (s *Store) PullPublicImage(ctx context.Context, name, ref string, maxBytes int64, progress func(Progress)) (Info, error) {
	r, err := parseRef(ref)
	if err != nil {
		return Info{}, err
	}
	// Checked first too, for a clear answer before anything is fetched.
	if _, err := outwardAddrs(ctx, registryHost(r)); err != nil {
		return Info{}, err
	}
	return s.pull(ctx, name, ref, outwardTransport(), maxBytes, progress)
}

// pull makes name from the image ref, reaching the registry through t.
func (s *Store) pull(ctx context.Context, name, ref string, t http.RoundTripper, maxBytes int64, progress func(Progress)) (Info, error) {
	if progress == nil {
		progress = func(Progress) {}
	}
	if err := CheckName(name); err != nil {
		return Info{}, err
	}
	r, err := parseRef(ref)
	if err != nil {
		return Info{}, err
	}
	progress(Progress{Step: "pull", Message: "Reading the manifest of " + r.String()})
	img, err := remote.Image(r, remote.WithContext(ctx), remote.WithPlatform(platform), remote.WithTransport(t))
	if err != nil {
		return Info{}, imageError(ctx, "pull "+r.String(), err)
	}
	return s.importImage(ctx, name, img, r.String(), newBudget(maxBytes), progress)
}

// parseRef checks an image reference.
func parseRef(ref string) (name.Reference, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, errdefs.InvalidArgument("image reference %q: %v", ref, err)
	}
	return r, nil
}

// ImportArchive makes name from an image tarball, the file archive: a docker-archive
// (what `docker save` writes) or an OCI image layout packed in a tar.
// maxBytes, when not 0, bounds what its layers unpack to, and what an OCI
// layout's tar unpacks to first: past it the import stops
// (errdefs.ErrResourceExhausted) and leaves nothing.
func (s *Store) ImportArchive(ctx context.Context, name, archive string, maxBytes int64, progress func(Progress)) (Info, error) {
	if progress == nil {
		progress = func(Progress) {}
	}
	if err := CheckName(name); err != nil {
		return Info{}, err
	}
	progress(Progress{Step: "read", Message: "Reading the image archive"})
	img, cleanup, err := s.openArchive(archive, newBudget(maxBytes))
	if err != nil {
		return Info{}, err
	}
	defer cleanup()
	return s.importImage(ctx, name, img, "archive", newBudget(maxBytes), progress)
}

// openArchive opens the image in a docker-archive or OCI layout tarball.
// An OCI layout is unpacked into a directory of the store first, within
// room, removed by cleanup.
func (s *Store) openArchive(archive string, room *budget) (_ v1.Image, cleanup func(), err error) {
	cleanup = func() {}
	names, err := tarNames(archive)
	if err != nil {
		return nil, cleanup, errdefs.InvalidArgument("the image archive is not a tar file: %v", err)
	}
	switch {
	case names["manifest.json"]:
		img, err := tarball.ImageFromPath(archive, nil)
		if err != nil {
			return nil, cleanup, errdefs.InvalidArgument("the docker-archive is not a usable image: %v", err)
		}
		return img, cleanup, nil
	case names["oci-layout"] && names["index.json"]:
		dir, err := os.MkdirTemp(s.dir, ".build-import-") // removed by Open after a crash, as builds are
		if err != nil {
			return nil, cleanup, err
		}
		cleanup = func() { _ = os.RemoveAll(dir) } // scratch of the store
		// #nosec G304 -- the upload the daemon saved
		f, err := os.Open(archive)
		if err != nil {
			return nil, cleanup, err
		}
		defer f.Close()
		if err := untar(f, dir, room); err != nil {
			if errdefs.Kind(err) != nil {
				return nil, cleanup, errdefs.Prefix(err, "the OCI layout archive")
			}
			return nil, cleanup, errdefs.InvalidArgument("the OCI layout archive: %v", err)
		}
		img, err := layoutImage(dir)
		return img, cleanup, err
	}
	return nil, cleanup, errdefs.InvalidArgument("the archive is neither a docker-archive (manifest.json) nor an OCI image layout (oci-layout, index.json)")
}

// Upload saves an image archive read from r beside the store (where a crash
// leaves it to Open to remove) and returns its path; cleanup removes it.
// maxBytes, when not 0, bounds the archive: past it the upload stops
// (errdefs.ErrResourceExhausted) and leaves nothing.
func (s *Store) Upload(r io.Reader, maxBytes int64) (path string, cleanup func(), err error) {
	f, err := os.CreateTemp(s.dir, ".build-upload-")
	if err != nil {
		return "", func() {}, err
	}
	cleanup = func() { _ = os.Remove(f.Name()) } // scratch of the store
	if maxBytes > 0 {
		var n int64
		n, err = io.Copy(f, io.LimitReader(r, maxBytes+1))
		if err == nil && n > maxBytes {
			err = errdefs.ResourceExhausted("the image archive is over %s, the most this build may put on disk", mib(maxBytes))
		}
	} else {
		_, err = io.Copy(f, r)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		cleanup()
		switch {
		case errors.Is(err, syscall.ENOSPC):
			return "", func() {}, errdefs.ResourceExhausted("the daemon's disk is full: %v", err)
		case errdefs.Kind(err) != nil:
			return "", func() {}, err
		}
		return "", func() {}, fmt.Errorf("receive the image archive: %w", err)
	}
	return f.Name(), cleanup, nil
}

// layoutImage finds the linux/amd64 image of an OCI layout.
func layoutImage(dir string) (v1.Image, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, errdefs.InvalidArgument("the OCI image layout: %v", err)
	}
	for range 4 { // an index may point at an index: a few levels at most
		m, err := idx.IndexManifest()
		if err != nil {
			return nil, errdefs.InvalidArgument("the OCI image index: %v", err)
		}
		var next v1.ImageIndex
		for _, d := range m.Manifests {
			if d.Platform != nil && !d.Platform.Satisfies(platform) {
				continue
			}
			if d.MediaType.IsImage() {
				img, err := idx.Image(d.Digest)
				if err != nil {
					return nil, errdefs.InvalidArgument("the OCI image layout: %v", err)
				}
				return img, nil
			}
			if d.MediaType.IsIndex() && next == nil {
				if next, err = idx.ImageIndex(d.Digest); err != nil {
					return nil, errdefs.InvalidArgument("the OCI image layout: %v", err)
				}
			}
		}
		if next == nil {
			break
		}
		idx = next
	}
	return nil, errdefs.InvalidArgument("the OCI image layout has no linux/amd64 image")
}

// tarNames lists the top-level names in a tar file.
func tarNames(archive string) (map[string]bool, error) {
	f, err := os.Open(archive) // #nosec G304 -- the upload the daemon saved
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names := map[string]bool{}
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names, nil
		}
		if err != nil {
			return nil, err
		}
		names[strings.TrimPrefix(path.Clean("/"+hdr.Name), "/")] = true
	}
}

// importImage flattens img into a new version of name, its root within
// room.
func (s *Store) importImage(ctx context.Context, name string, img v1.Image, source string, room *budget, progress func(Progress)) (_ Info, err error) {
	digest, err := img.Digest()
	if err != nil {
		return Info{}, imageError(ctx, source, err)
	}
	layers, err := img.Layers()
	if err != nil {
		return Info{}, imageError(ctx, source, err)
	}
	b, err := s.Begin(name)
	if err != nil {
		return Info{}, err
	}
	defer func() { err = b.fail(ctx, err) }()
	progress(Progress{Step: "extract", Total: len(layers), Message: fmt.Sprintf("Unpacking %d layers", len(layers))})
	// #nosec G301 -- sandbox users must traverse the root
	if err := os.Mkdir(b.Root(), 0o755); err != nil {
		return Info{}, err
	}
	flat := mutate.Extract(img) // the layers with their whiteouts applied
	defer flat.Close()
	if err := untar(ctxio.Reader(ctx, flat), b.Root(), room); err != nil {
		if errors.Is(err, errdefs.ErrResourceExhausted) && ctx.Err() == nil {
			return Info{}, errdefs.Prefix(err, "image %s", source)
		}
		return Info{}, imageError(ctx, source, err)
	}
	progress(Progress{Step: "finish", Message: "Adding the sandbox user"})
	if err := finishImageRoot(b.Root()); err != nil {
		return Info{}, fmt.Errorf("template %s: %w", name, err)
	}
	return b.Commit(Info{Source: SourceImage, Image: source, Digest: digest.String()})
}

// imageError says what went wrong with an image for a person: the build
// was interrupted, the disk is full, or the image is not usable (not
// found, not an image, corrupt): an invalid argument. A registry's answer
// is told by its status and error codes, never its body, which may be
// anything a server on the other end chose to say.
func imageError(ctx context.Context, what string, err error) error {
	var answer *transport.Error
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("template build interrupted: %w", context.Cause(ctx))
	case errors.Is(err, syscall.ENOSPC):
		return errdefs.ResourceExhausted("%s: the daemon's disk is full: %v", what, err)
	case errdefs.Kind(err) != nil:
		return err
	case errors.As(err, &answer):
		return errdefs.InvalidArgument("%s: the registry answered %d %s%s", what, answer.StatusCode, http.StatusText(answer.StatusCode), errorCodes(answer))
	}
	return errdefs.InvalidArgument("%s: %v", what, err)
}

// validErrorCode is a registry's error code as the distribution spec has
// them (MANIFEST_UNKNOWN, UNAUTHORIZED, …).
var validErrorCode = regexp.MustCompile(`^[A-Z_]{1,40}$`)

// errorCodes lists the error codes of a registry's answer that look like
// codes, for a message.
func errorCodes(answer *transport.Error) string {
	var codes []string
	for _, d := range answer.Errors {
		if c := string(d.Code); validErrorCode.MatchString(c) && !slices.Contains(codes, c) {
			codes = append(codes, c)
		}
	}
	if len(codes) == 0 {
		return ""
	}
	return " (" + strings.Join(codes, ", ") + ")"
}

// finishImageRoot gives an image's root what every template has. An image
// may have none of /etc, /tmp or /home, and what it has is untrusted: the
// paths the finish writes must not be symbolic links, which the daemon
// would follow on the host. Such links are removed where Hutch puts its
// own file anyway, and refused for the account files it appends to.
func finishImageRoot(root string) error {
	for _, p := range []string{"etc/passwd", "etc/group", "etc/shadow"} {
		if fi, err := os.Lstat(filepath.Join(root, p)); err == nil && !fi.Mode().IsRegular() {
			return errdefs.InvalidArgument("the image's /%s is not a regular file", p)
		}
	}
	for _, p := range []string{"etc", "tmp", "home", "home/user", "home/user/workspace", ".hutch", ".hutch/hutch", "etc/hosts", "etc/hostname"} {
		if fi, err := os.Lstat(filepath.Join(root, p)); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			if err := os.Remove(filepath.Join(root, p)); err != nil {
				return err
			}
		}
	}
	for _, d := range []string{"etc", "tmp"} {
		// #nosec G301 -- every user reads /etc and writes /tmp (sticky, below)
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return err
		}
		if fi, err := os.Lstat(filepath.Join(root, d)); err != nil || !fi.IsDir() {
			return errdefs.InvalidArgument("the image's /%s is not a directory", d)
		}
	}
	if err := os.Chmod(filepath.Join(root, "tmp"), os.ModeSticky|0o777); err != nil {
		return err
	}
	for _, f := range []string{"etc/passwd", "etc/group"} {
		// #nosec G302 G304 -- account files every user reads
		fh, err := os.OpenFile(filepath.Join(root, f), os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		if err := fh.Close(); err != nil {
			return err
		}
	}
	return finishDebianRoot(root)
}

// untar unpacks a tar stream into root, a directory nothing else writes
// to meanwhile. The archive is untrusted: names are taken inside root
// ("../x" and "/x" are both root/x), no path is followed through a
// symbolic link the archive made, and hard links point inside root. Device
// nodes are skipped (sandboxes get theirs from the runtime). Every entry is
// charged to room before it is written (nil: no bound); the first that
// does not fit ends the unpacking with errdefs.ErrResourceExhausted.
func untar(r io.Reader, root string, room *budget) error {
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(path.Clean("/"+hdr.Name), "/")
		if rel == "" {
			continue // the root itself
		}
		if err := room.charge(hdr); err != nil {
			return err
		}
		target := filepath.Join(root, rel)
		if err := realParents(root, filepath.Dir(rel)); err != nil {
			return fmt.Errorf("%s: %w", hdr.Name, err)
		}
		mode := os.FileMode(hdr.Mode & 0o777) // #nosec G115 -- nine bits
		for bit, m := range map[int64]os.FileMode{0o4000: os.ModeSetuid, 0o2000: os.ModeSetgid, 0o1000: os.ModeSticky} {
			if hdr.Mode&bit != 0 {
				mode |= m
			}
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			fi, err := os.Lstat(target)
			if err == nil && !fi.IsDir() {
				if err := os.Remove(target); err != nil {
					return err
				}
			}
			if err != nil || !fi.IsDir() {
				if err := os.Mkdir(target, 0o700); err != nil {
					return err
				}
			}
		case tar.TypeReg:
			if err := removeNonDir(target); err != nil {
				return err
			}
			// #nosec G304 -- a path inside the root, its parents checked
			f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr) // #nosec G110 -- the size is the header's, charged to room above
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := removeNonDir(target); err != nil {
				return err
			}
			if err := os.Symlink(hdr.Linkname, target); err != nil {
				return err
			}
		case tar.TypeLink:
			src := strings.TrimPrefix(path.Clean("/"+hdr.Linkname), "/")
			if err := realParents(root, filepath.Dir(src)); err != nil {
				return fmt.Errorf("%s: link to %s: %w", hdr.Name, hdr.Linkname, err)
			}
			fi, err := os.Lstat(filepath.Join(root, src))
			if err != nil || !fi.Mode().IsRegular() {
				return fmt.Errorf("%s: a hard link to %s, which is not a file of the image", hdr.Name, hdr.Linkname)
			}
			if err := removeNonDir(target); err != nil {
				return err
			}
			if err := os.Link(filepath.Join(root, src), target); err != nil {
				return err
			}
			continue // the link shares its file's owner and mode
		default:
			continue
		}
		if err := os.Lchown(target, hdr.Uid, hdr.Gid); err != nil {
			return err
		}
		if hdr.Typeflag != tar.TypeSymlink {
			if err := os.Chmod(target, mode); err != nil {
				return err
			}
			mtime := hdr.ModTime
			if mtime.IsZero() {
				mtime = time.Unix(0, 0)
			}
			if err := os.Chtimes(target, mtime, mtime); err != nil {
				return err
			}
		}
	}
}

// realParents makes sure dir (relative to root) is a chain of real
// directories, making the missing ones, and never going through a
// symbolic link.
func realParents(root, dir string) error {
	if dir == "." || dir == "" {
		return nil
	}
	cur := root
	for _, part := range strings.Split(dir, string(filepath.Separator)) {
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// #nosec G301 -- as tar makes missing parents
			if err := os.Mkdir(cur, 0o755); err != nil {
				return err
			}
		case err != nil:
			return err
		case !fi.IsDir():
			return fmt.Errorf("the path goes through %s, which is not a directory", strings.TrimPrefix(cur, root))
		}
	}
	return nil
}

// removeNonDir removes what is at path unless it is missing; a directory
// in the way of a file is an error.
func removeNonDir(path string) error {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case fi.IsDir():
		return fmt.Errorf("%s is a directory in the image, and a file in a later layer", path)
	}
	return os.Remove(path)
}
