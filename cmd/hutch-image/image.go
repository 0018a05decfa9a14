package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// options is what an image is built from.
type options struct {
	hutch, runsc string   // static binaries
	version      string   // for the labels
	debs         []string // .deb files, unpacked in order
}

// binDir is where the image keeps hutch and runsc: side by side, since
// the daemon looks for runsc beside its own executable first.
const binDir = "usr/local/bin"

// imagePath is the PATH of the image: Debian's, with binDir first.
const imagePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// leftOut are the parts of Debian packages a daemon never reads.
var leftOut = []string{"usr/share/doc/", "usr/share/man/", "usr/share/info/", "usr/share/locale/", "usr/share/lintian/", "usr/share/bug/"}

// certsBundle is the file Go's crypto/x509 (and OpenSSL) read the trusted
// roots from on Debian. The ca-certificates package makes it in its
// maintainer script, which unpacking does not run; the builder makes it
// from the package's certificates, as update-ca-certificates would.
const certsBundle = "etc/ssl/certs/ca-certificates.crt"

// build makes the image: a layer of the Debian packages, then one of the
// two binaries. Its layers are files in work, which must outlive the image.
func build(ctx context.Context, o options, work string) (v1.Image, error) {
	arch, err := debArch(ctx, o.debs)
	if err != nil {
		return nil, err
	}
	debian := filepath.Join(work, "debian.tar")
	if err := writeFile(debian, func(w io.Writer) error { return writeDebianLayer(ctx, w, o.debs, work) }); err != nil {
		return nil, err
	}
	id, err := contentID(debian, o.hutch, o.runsc)
	if err != nil {
		return nil, err
	}
	binaries := filepath.Join(work, "hutch.tar")
	if err := writeFile(binaries, func(w io.Writer) error {
		return writeBinaryLayer(w, map[string]string{"hutch": o.hutch, "runsc": o.runsc}, id)
	}); err != nil {
		return nil, err
	}
	var layers []v1.Layer
	for _, p := range []string{debian, binaries} {
		// Gzip's fastest level: the layers are mostly executables, which
		// the best level shrinks by a few percent for several times the time.
		l, err := tarball.LayerFromFile(p, tarball.WithCompressionLevel(gzip.BestSpeed))
		if err != nil {
			return nil, fmt.Errorf("layer %s: %w", p, err)
		}
		layers = append(layers, l)
	}
	img, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{
		Architecture: arch,
		OS:           "linux",
		Config: v1.Config{
			Entrypoint: []string{"/" + binDir + "/hutch"},
			Cmd:        []string{"serve"},
			Env:        []string{"PATH=" + imagePath},
			Labels: map[string]string{
				"org.opencontainers.image.title":   "hutch",
				"org.opencontainers.image.version": o.version,
				"org.opencontainers.image.source":  "https://github.com/hutchdev/hutch",
			},
		},
	})
	if err != nil {
		return nil, err
	}
	return mutate.AppendLayers(img, layers...)
}

// debArch is the architecture of the packages, as Go names it (the
// image's). Packages of architecture all fit any.
func debArch(ctx context.Context, debs []string) (string, error) {
	goArch := map[string]string{"amd64": "amd64", "arm64": "arm64", "armhf": "arm", "i386": "386", "ppc64el": "ppc64le", "s390x": "s390x", "riscv64": "riscv64"}
	found := ""
	for _, deb := range debs {
		out, err := exec.CommandContext(ctx, "dpkg-deb", "--field", deb, "Architecture").Output() // #nosec G204 -- a package the caller named, read by dpkg-deb
		if err != nil {
			return "", fmt.Errorf("read the architecture of %s (dpkg-deb): %w", deb, err)
		}
		a := strings.TrimSpace(string(out))
		if a == "all" {
			continue
		}
		g, ok := goArch[a]
		if !ok {
			return "", fmt.Errorf("%s: architecture %s is not one an image is built for", deb, a)
		}
		if found != "" && g != found {
			return "", fmt.Errorf("%s is for %s, other packages for %s", deb, g, found)
		}
		found = g
	}
	if found == "" {
		return "", errors.New("every package is of architecture all: give at least one binary package")
	}
	return found, nil
}

// layerWriter writes a layer's tar stream, each directory once, making the
// parents of what it is given.
type layerWriter struct {
	tw   *tar.Writer
	seen map[string]bool // names written, without a trailing slash
}

func newLayerWriter(w io.Writer) *layerWriter {
	return &layerWriter{tw: tar.NewWriter(w), seen: map[string]bool{}}
}

// epoch is the time of the entries the builder makes, so that the same
// inputs give the same layers.
var epoch = time.Unix(0, 0)

// parents writes the directories above name that are not written yet.
func (lw *layerWriter) parents(name string) error {
	dir := path.Dir(name)
	if dir == "." || lw.seen[dir] {
		return nil
	}
	if err := lw.parents(dir); err != nil {
		return err
	}
	return lw.write(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o755, ModTime: epoch}, nil)
}

// write writes hdr (its name relative, no leading "./") and body. A
// directory already written is skipped: packages share /usr and the like.
func (lw *layerWriter) write(hdr *tar.Header, body io.Reader) error {
	name := strings.TrimSuffix(hdr.Name, "/")
	if hdr.Typeflag == tar.TypeDir {
		if lw.seen[name] {
			return nil
		}
		hdr.Name = name + "/"
	}
	if err := lw.parents(name); err != nil {
		return err
	}
	lw.seen[name] = true
	if err := lw.tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if body != nil {
		if _, err := io.Copy(lw.tw, body); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return nil
}

// writeDebianLayer unpacks the packages into one layer, leaving out their
// documentation, then adds what their maintainer scripts would have made:
// busybox's links to its applets (sh, cat, httpd, …) and the bundle of
// trusted certificates. Busybox is run to list its applets, from work.
func writeDebianLayer(ctx context.Context, w io.Writer, debs []string, work string) error {
	lw := newLayerWriter(w)
	var certs bytes.Buffer
	busybox := ""
	for _, deb := range debs {
		err := unpackDeb(ctx, deb, func(hdr *tar.Header, body io.Reader) error {
			switch {
			case hdr.Name == "bin/busybox" && hdr.Typeflag == tar.TypeReg:
				busybox = filepath.Join(work, "busybox")
				f, err := os.OpenFile(busybox, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o700) // #nosec G302 G304 -- run once to list its applets
				if err != nil {
					return err
				}
				defer f.Close()
				body = io.TeeReader(body, f)
			case strings.HasPrefix(hdr.Name, "usr/share/ca-certificates/") && strings.HasSuffix(hdr.Name, ".crt"):
				body = io.TeeReader(body, &certs)
			}
			return lw.write(hdr, body)
		})
		if err != nil {
			return err
		}
	}
	if busybox != "" {
		applets, err := busyboxApplets(ctx, busybox)
		if err != nil {
			return err
		}
		for _, a := range applets {
			if lw.seen[a] {
				continue // a real program from a package wins
			}
			if err := lw.write(&tar.Header{Typeflag: tar.TypeSymlink, Name: a, Linkname: "/bin/busybox", Mode: 0o777, ModTime: epoch}, nil); err != nil {
				return err
			}
		}
	}
	if certs.Len() > 0 && !lw.seen[certsBundle] {
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: certsBundle, Mode: 0o644, Size: int64(certs.Len()), ModTime: epoch}
		if err := lw.write(hdr, &certs); err != nil {
			return err
		}
	}
	// What a root filesystem has that no package ships: a /tmp for
	// everyone.
	if err := lw.write(&tar.Header{Typeflag: tar.TypeDir, Name: "tmp", Mode: 0o1777, ModTime: epoch}, nil); err != nil {
		return err
	}
	return lw.tw.Close()
}

// unpackDeb calls fn for each entry of deb's data, named relative to the
// root, documentation left out.
func unpackDeb(ctx context.Context, deb string, fn func(*tar.Header, io.Reader) error) error {
	cmd := exec.CommandContext(ctx, "dpkg-deb", "--fsys-tarfile", deb) // #nosec G204 -- a package the caller named, read by dpkg-deb
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("unpack %s: %w (dpkg-deb is Debian's dpkg package)", deb, err)
	}
	err = readDebTar(out, fn)
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("unpack %s: %w", deb, err)
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("unpack %s: %w: %s", deb, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

func readDebTar(r io.Reader, fn func(*tar.Header, io.Reader) error) error {
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := relative(hdr.Name)
		if name == "" || excluded(name, hdr.Typeflag == tar.TypeDir) {
			continue
		}
		hdr.Name = name
		if hdr.Typeflag == tar.TypeLink {
			hdr.Linkname = relative(hdr.Linkname)
		}
		// The packages' owners are numeric and root's; names are left out
		// as the image's own /etc/passwd does not have them.
		hdr.Uname, hdr.Gname = "", ""
		if err := fn(hdr, tr); err != nil {
			return err
		}
	}
}

// relative is a package's path ("./usr/bin/x") relative to the root
// ("usr/bin/x"); "" for the root itself. A path that climbs out is kept
// inside.
func relative(p string) string {
	p = path.Clean("/" + p)
	return strings.TrimPrefix(p, "/")
}

func excluded(name string, dir bool) bool {
	if dir {
		name += "/"
	}
	for _, prefix := range leftOut {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

// busyboxApplets lists busybox's applets as paths relative to the root
// (bin/sh, usr/bin/httpd, …), by asking it.
func busyboxApplets(ctx context.Context, busybox string) ([]string, error) {
	out, err := exec.CommandContext(ctx, busybox, "--list-full").Output() // #nosec G204 -- the package's busybox, unpacked by the builder
	if err != nil {
		return nil, fmt.Errorf("list busybox's applets (an image for another architecture cannot be built here): %w", err)
	}
	var applets []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		// Applets at the root (linuxrc) are for an initramfs.
		if a := relative(strings.TrimSpace(sc.Text())); strings.Contains(a, "/") {
			applets = append(applets, a)
		}
	}
	return applets, sc.Err()
}

// idFile names the image's content (contentID): what a node runs, for an
// operator to tell images of one tag apart.
const idFile = "usr/local/share/hutch/image-id"

// contentID is a name for what the image holds: the hash of its Debian
// layer and its two binaries.
func contentID(files ...string) (string, error) {
	h := sha256.New()
	for _, p := range files {
		f, err := os.Open(p) // #nosec G304 -- a file of the build
		if err != nil {
			return "", err
		}
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// writeBinaryLayer writes a layer of executables into binDir, by their
// names in the image, and the image's content ID.
func writeBinaryLayer(w io.Writer, files map[string]string, id string) error {
	lw := newLayerWriter(w)
	idHdr := &tar.Header{Typeflag: tar.TypeReg, Name: idFile, Mode: 0o644, Size: int64(len(id) + 1), ModTime: epoch}
	if err := lw.write(idHdr, strings.NewReader(id+"\n")); err != nil {
		return err
	}
	for _, n := range []string{"hutch", "runsc"} {
		src := files[n]
		f, err := os.Open(src) // #nosec G304 -- a binary the caller named
		if err != nil {
			return err
		}
		fi, err := f.Stat()
		if err == nil && !fi.Mode().IsRegular() {
			err = fmt.Errorf("%s is not a file", src)
		}
		if err == nil {
			hdr := &tar.Header{Typeflag: tar.TypeReg, Name: path.Join(binDir, n), Mode: 0o755, Size: fi.Size(), ModTime: epoch}
			err = lw.write(hdr, f)
		}
		f.Close()
		if err != nil {
			return err
		}
	}
	return lw.tw.Close()
}

// writeFile writes a file with fn, whole or not at all.
func writeFile(p string, fn func(io.Writer) error) (err error) {
	tmp := p + ".tmp"
	f, err := os.Create(tmp) // #nosec G304 -- a path the caller chose
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp)
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	err = fn(bw)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	return err
}

// writeArchive writes img as a docker-archive tarball named tag.
func writeArchive(p, tag string, img v1.Image) error {
	t, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("image name %q: %w", tag, err)
	}
	return writeFile(p, func(w io.Writer) error { return tarball.Write(t, img, w) })
}

// pushImage pushes img to ref with the credentials docker would use.
func pushImage(ctx context.Context, ref string, img v1.Image) error {
	r, err := name.ParseReference(ref)
	if err != nil {
		return fmt.Errorf("image reference %q: %w", ref, err)
	}
	if err := remote.Write(r, img, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	return nil
}
