package template

import (
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
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
	from := filepath.Join(cacheDir, "npm", "content-v2")
	to := filepath.Join(root, npmCacheDir, "_cacache", "content-v2")
	err := filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			// #nosec G301 -- npm in the build's sandbox reads it as root
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		return copyFile(path, filepath.Join(to, rel))
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// keepNpmCache moves into cacheDir the tarballs of root's npm cache that
// are what their names say, drops the rest of it from root, and forgets
// tarballs no build used for npmCacheMaxAge.
func keepNpmCache(root, cacheDir string) (err error) {
	built := filepath.Join(root, npmCacheDir)
	defer func() { err = errors.Join(err, os.RemoveAll(built)) }()
	if cacheDir == "" {
		return nil
	}
	from := filepath.Join(built, "_cacache", "content-v2", "sha512")
	to := filepath.Join(cacheDir, "npm", "content-v2", "sha512")
	err = filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(from, path)
		if err != nil {
			return err
		}
		kept := filepath.Join(to, rel)
		if _, err := os.Stat(kept); err == nil {
			now := time.Now()
			return os.Chtimes(kept, now, now) // used: kept longer
		}
		if ok, err := matchesDigest(path, strings.ReplaceAll(rel, string(filepath.Separator), "")); err != nil || !ok {
			return err // one that is not what its name says stays out
		}
		if err := os.MkdirAll(filepath.Dir(kept), 0o700); err != nil {
			return err
		}
		return copyFile(path, kept)
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("keep npm's downloads: %w", err)
	}
	return pruneOlder(to, npmCacheMaxAge)
}

// matchesDigest reports whether the file at path has the SHA-512 hexDigest.
func matchesDigest(path, hexDigest string) (bool, error) {
	want, err := hex.DecodeString(hexDigest)
	if err != nil || len(want) != sha512.Size {
		return false, nil
	}
	// #nosec G304 -- a file of a build's root
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	h := sha512.New()
	if _, err := io.Copy(h, f); err != nil {
		return false, err
	}
	return string(h.Sum(nil)) == string(want), nil
}

// copyFile copies a regular file to a new path, whole or not at all.
func copyFile(from, to string) error {
	// #nosec G304 -- paths of the daemon's cache and a build's root
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
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
