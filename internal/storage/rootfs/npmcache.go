package rootfs

import (
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// npm's downloads are kept between builds as apt's are, in CacheDir/npm:
// only the packages' tarballs, which npm's cache (cacache) keeps under
// their SHA-512 (content-v2/sha512/xx/yy/rest), never its index. A build's
// npm finds a tarball there by the digest the registry's metadata names
// and checks it on reading; the metadata is fetched afresh each time. What
// a build's npm downloaded joins the cache only after the daemon has
// checked that it is what its name says: a build cannot plant a package
// for another one to install.

// npmCacheDir is where npm's cache is in a build's root (npm --cache).
const npmCacheDir = "tmp/.hutch-npm"

// npmCacheMaxAge is how long a tarball no build used stays cached.
const npmCacheMaxAge = 30 * 24 * time.Hour

// seedNpmCache copies the cached tarballs into root's npm cache.
func seedNpmCache(root, cacheDir string) error {
	if cacheDir == "" {
		return nil
	}
	r, err := openRoot(root)
	if err != nil {
		return err
	}
	defer r.Close()
	from := filepath.Join(cacheDir, "npm", "content-v2")
	to := path.Join(npmCacheDir, "_cacache", "content-v2")
	err = filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, p)
		if err != nil {
			return err
		}
		target := path.Join(to, filepath.ToSlash(rel))
		if d.IsDir() {
			return r.mkdirAll(target)
		}
		// #nosec G304 -- a file of the daemon's cache
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		// #nosec G306 -- npm in the build's sandbox reads it
		return r.writeFrom(target, f, 0o644)
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// keepNpmCache moves into cacheDir the tarballs of root's npm cache that
// are what their names say, drops the rest of it from root, and forgets
// tarballs no build used for npmCacheMaxAge. The root's npm cache is the
// build's (npm's install scripts ran beside it): it is read beneath the
// root, no link followed.
func keepNpmCache(root, cacheDir string) (err error) {
	r, err := openRoot(root)
	if err != nil {
		return err
	}
	defer r.Close()
	defer func() { err = errors.Join(err, r.removeAll(npmCacheDir)) }()
	if cacheDir == "" {
		return nil
	}
	to := filepath.Join(cacheDir, "npm", "content-v2", "sha512")
	err = walkFiles(r, path.Join(npmCacheDir, "_cacache", "content-v2", "sha512"), func(rel string, f *os.File) error {
		kept := filepath.Join(to, filepath.FromSlash(rel))
		if _, err := os.Stat(kept); err == nil {
			now := time.Now()
			return os.Chtimes(kept, now, now) // used: kept longer
		}
		if ok, err := matchesDigest(f, strings.ReplaceAll(rel, "/", "")); err != nil || !ok {
			return err // one that is not what its name says stays out
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(kept), 0o700); err != nil {
			return err
		}
		return copyFrom(f, kept)
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("keep npm's downloads: %w", err)
	}
	return pruneOlder(to, npmCacheMaxAge)
}

// walkFiles calls fn with each regular file under directory dir of the
// root (its path relative to dir, and the file opened for reading); links
// and other files are passed over, never followed.
func walkFiles(r *rootDir, dir string, fn func(rel string, f *os.File) error) error {
	var walk func(rel string) error
	walk = func(rel string) error {
		entries, err := r.glob(path.Join(dir, rel), "*")
		if err != nil {
			return err
		}
		for _, e := range entries {
			sub := path.Join(rel, e.Name())
			switch {
			case e.IsDir():
				err = walk(sub)
			case e.Type().IsRegular():
				err = withFile(r, path.Join(dir, sub), func(f *os.File) error { return fn(sub, f) })
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	return walk(".")
}

// withFile calls fn with the regular file rel of the root opened for
// reading.
func withFile(r *rootDir, rel string, fn func(*os.File) error) error {
	f, err := r.open(rel, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return err
	}
	return fn(f)
}

// matchesDigest reports whether what r holds has the SHA-512 hexDigest.
func matchesDigest(r io.Reader, hexDigest string) (bool, error) {
	want, err := hex.DecodeString(hexDigest)
	if err != nil || len(want) != sha512.Size {
		return false, nil
	}
	h := sha512.New()
	if _, err := io.Copy(h, r); err != nil {
		return false, err
	}
	return string(h.Sum(nil)) == string(want), nil
}

// copyFrom copies what src holds to a new file at path to, whole or not
// at all.
func copyFrom(src io.Reader, to string) error {
	tmp, err := os.CreateTemp(filepath.Dir(to), ".copy-*")
	if err != nil {
		return err
	}
	_, err = io.Copy(tmp, src)
	err = errors.Join(err, tmp.Chmod(0o644), tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), to)
	}
	if err != nil {
		return errors.Join(err, os.Remove(tmp.Name()))
	}
	return nil
}

// pruneOlder removes the files under dir not touched for maxAge.
func pruneOlder(dir string, maxAge time.Duration) error {
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if time.Since(info.ModTime()) > maxAge {
			return os.Remove(path)
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}
