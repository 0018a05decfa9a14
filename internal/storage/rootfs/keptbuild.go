package rootfs

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// A default template (base, python, …) is the same for every build from
// the same archive state with the same packages: minutes of apt-get and
// npm on a two-core host, for a root that is already on the machine when
// it was built before (the tests' daemons build base and python each; a
// reinstalled daemon builds them again). So a build with Keep keeps its
// root in the package cache, as a tar archive named after everything the
// root is made from (keptKey), and a build whose key is kept unpacks it
// instead of building. Any change makes a new key: a point release or a
// security update (the archives' InRelease files), another npm release of
// a package, other certificate authorities, another package list, or a
// change of the code that builds. Only the latest of each template is
// kept.

// buildSource is this package's source, the code of every step that makes
// a Debian root: a change of any gives every kept build a new key, so that
// no root made the old way is reused.
//
//go:embed *.go
var buildSource embed.FS

// buildCode is the hash of buildSource's files but the tests.
var buildCode = sync.OnceValue(func() string {
	h := sha256.New()
	entries, _ := fs.ReadDir(buildSource, ".") // sorted by name
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		b, _ := fs.ReadFile(buildSource, e.Name())
		_, _ = fmt.Fprintf(h, "%s %x\n", e.Name(), sha256.Sum256(b))
	}
	return hex.EncodeToString(h.Sum(nil))
})

// npmRegistryURL is where npm packages' versions are asked (tests point
// it elsewhere).
var npmRegistryURL = "https://" + strings.TrimSuffix(NpmRegistry, ":443")

// awaitKept says where the build of name with opts is kept ("" when it
// cannot be: no Keep, no cache, or a source that does not say its state),
// holding that key's lock until unlock: a build of the same key under way
// elsewhere (the tests' daemons build python at once) is waited for, and
// what it keeps used.
func awaitKept(ctx context.Context, name string, opts DebianOptions, progress func(Progress)) (path string, unlock func(), err error) {
	if !opts.Keep || opts.CacheDir == "" {
		return "", func() {}, nil
	}
	key, err := keptKey(ctx, opts)
	if err != nil {
		return "", func() {}, nil
	}
	dir := filepath.Join(opts.CacheDir, "builds")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", nil, fmt.Errorf("package cache: %w", err)
	}
	path = filepath.Join(dir, name+"-"+key+".tar")
	unlock, err = lockFile(ctx, path+".lock", func() {
		progress(Progress{Step: "base", Message: "Waiting for another build of the same packages, to unpack what it keeps"})
	})
	if err != nil {
		return "", nil, fmt.Errorf("package cache: %w", err)
	}
	return path, unlock, nil
}

// keptKey is the hash of everything a root built with opts is made from.
func keptKey(ctx context.Context, opts DebianOptions) (string, error) {
	h := sha256.New()
	line := func(parts ...string) { _, _ = fmt.Fprintln(h, strings.Join(parts, " ")) }
	line("code", buildCode(), baseRecipe)
	for _, a := range []struct{ mirror, suite string }{
		{opts.Mirror, opts.Suite}, {securityArchive(opts.Suite, opts.Mirror), opts.Suite + "-security"},
	} {
		if a.mirror == "" {
			continue
		}
		state, err := archiveState(ctx, a.mirror, a.suite)
		if err != nil {
			return "", err
		}
		line("archive", a.mirror, a.suite, state)
	}
	packages := slices.Sorted(slices.Values(opts.Packages))
	line(append([]string{"packages"}, packages...)...)
	for _, p := range opts.NpmPackages {
		version, err := npmVersion(ctx, p)
		if err != nil {
			return "", err
		}
		line("npm", p, version)
	}
	cas, err := hashTree(orDefault(opts.LocalCAs, HostLocalCAs))
	if err != nil {
		return "", err
	}
	line("cas", cas)
	return hex.EncodeToString(h.Sum(nil))[:32], nil
}

// exactVersion is a version npm installs as it is, not a range or a tag.
var exactVersion = regexp.MustCompile(`^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`)

// npmVersion is the version npm installs for spec (name, @scope/name,
// name@version, name@tag): the version itself when exact, else the
// registry's for the tag (latest when none). A range has no one version
// without npm's resolution: it is not kept.
func npmVersion(ctx context.Context, spec string) (string, error) {
	name, tag := spec, "latest"
	if at := strings.LastIndex(spec, "@"); at > 0 {
		name, tag = spec[:at], spec[at+1:]
	}
	if exactVersion.MatchString(tag) {
		return tag, nil
	}
	if strings.ContainsAny(tag, "<>=^~*| ") {
		return "", fmt.Errorf("npm package %s: a range is not kept", spec)
	}
	// The abbreviated metadata: what npm install itself reads.
	body, err := fetch(ctx, npmRegistryURL+"/"+url.PathEscape(name), "application/vnd.npm.install-v1+json", 64<<20)
	if err != nil {
		return "", fmt.Errorf("npm package %s: %w", name, err)
	}
	var meta struct {
		DistTags map[string]string `json:"dist-tags"`
	}
	if err := json.Unmarshal(body, &meta); err != nil {
		return "", fmt.Errorf("npm package %s: %w", name, err)
	}
	v := meta.DistTags[tag]
	if v == "" {
		return "", fmt.Errorf("npm package %s has no version tagged %s", name, tag)
	}
	return v, nil
}

// hashTree hashes the names and contents of the regular files under dir
// ("" hashed for a missing dir).
func hashTree(dir string) (string, error) {
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && p == dir {
			return filepath.SkipDir
		}
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		// #nosec G304 -- the host's certificate authorities
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		_, _ = fmt.Fprintf(h, "%s %x\n", strings.TrimPrefix(p, dir), sum)
		return nil
	})
	return hex.EncodeToString(h.Sum(nil)), err
}
