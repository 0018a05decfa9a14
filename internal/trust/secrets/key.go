package secrets

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// EnvVar is the environment variable an operator may give the master key
// in, as base64 text; the daemon reads it and passes the text as
// KeySource.Env.
const EnvVar = "HUTCH_MASTER_KEY"

// KeySource says where the master key is.
type KeySource struct {
	// File is the key file: one the operator names, or <data dir>/secrets.key.
	// It holds 32 bytes in standard base64 and must be its owner's alone
	// (mode 0600 or 0400). A rotation writes the next key to File+".new"
	// first.
	File string
	// Create makes File on first start, when it is absent and no secret
	// was sealed yet.
	Create bool
	// Env, when not empty, is the key's base64 text from the environment
	// (EnvVar); it wins over File. Such a key cannot be rotated.
	Env string
}

// where says where the key comes from, for messages.
func (src KeySource) where() string {
	if src.Env != "" {
		return "the environment variable " + EnvVar
	}
	return "the key file " + src.File
}

// pending is where a rotation keeps the next key until the secrets are
// sealed under it.
func (src KeySource) pending() string { return src.File + ".new" }

// load returns the key src names; an error wrapping fs.ErrNotExist when
// its file is absent.
func (src KeySource) load() ([]byte, error) {
	if src.Env != "" {
		return parseKey([]byte(src.Env), "the environment variable "+EnvVar)
	}
	return readKeyFile(src.File)
}

// readKeyFile reads a key file, refusing one that others than its owner
// may read or write, as ssh refuses such a private key.
func readKeyFile(path string) ([]byte, error) {
	// #nosec G304 -- the operator's key file, or the daemon's own
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read master key: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read master key: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, errdefs.FailedPrecondition("master key file %s is not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, errdefs.FailedPrecondition("master key file %s may be read or written by others than its owner (mode %04o): refused; make it its owner's alone (chmod 600 %s) and consider whether the key leaked", path, perm, path)
	}
	text, err := io.ReadAll(io.LimitReader(f, 1024))
	if err != nil {
		return nil, fmt.Errorf("read master key file %s: %w", path, err)
	}
	defer clear(text)
	return parseKey(text, "master key file "+path)
}

// parseKey decodes a key's base64 text; what names where it came from.
// The text is never part of an error.
func parseKey(text []byte, what string) ([]byte, error) {
	s := bytes.TrimSpace(text)
	key := make([]byte, base64.StdEncoding.DecodedLen(len(s)))
	n, err := base64.StdEncoding.Decode(key, s)
	if err != nil || n != keySize {
		clear(key)
		return nil, errdefs.FailedPrecondition("%s does not hold a master key: want %d random bytes in standard base64 (44 characters, as `head -c 32 /dev/urandom | base64` prints)", what, keySize)
	}
	return key[:keySize], nil
}

// newKey returns a fresh random key.
func newKey() []byte {
	key := make([]byte, keySize)
	_, _ = rand.Read(key) // never fails (crypto/rand's contract since Go 1.24)
	return key
}

// writeKeyFile writes key to path in base64, mode 0600, durably: to a
// temporary file beside it, synced, then moved to path and the directory
// synced. With replace false it fails when path exists (fs.ErrExist)
// rather than replacing it.
func writeKeyFile(path string, key []byte, replace bool) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write master key: %w", err)
	}
	tmp := f.Name()
	defer func() {
		_ = f.Close()
		_ = os.Remove(tmp) // after a rename or link: gone already, or a second name
	}()
	text := make([]byte, base64.StdEncoding.EncodedLen(len(key))+1)
	defer clear(text)
	base64.StdEncoding.Encode(text, key)
	text[len(text)-1] = '\n'
	if err := f.Chmod(0o600); err != nil {
		return fmt.Errorf("write master key: %w", err)
	}
	if _, err := f.Write(text); err != nil {
		return fmt.Errorf("write master key: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("write master key: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write master key: %w", err)
	}
	if replace {
		err = os.Rename(tmp, path)
	} else {
		err = os.Link(tmp, path) // unlike a rename, never replaces a key there
	}
	if err != nil {
		return fmt.Errorf("write master key: %w", err)
	}
	return syncDir(dir)
}

// moveKeyFile renames from to to, durably.
func moveKeyFile(from, to string) error {
	if err := os.Rename(from, to); err != nil {
		return err
	}
	return syncDir(filepath.Dir(to))
}

// syncDir makes the entries of dir (a file made, renamed or removed)
// durable.
func syncDir(dir string) error {
	// #nosec G304 -- the key file's own directory
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// exists reports whether path names something (an error other than its
// absence counts as there: it is not ours to ignore).
func exists(path string) bool {
	_, err := os.Lstat(path)
	return !errors.Is(err, fs.ErrNotExist)
}
