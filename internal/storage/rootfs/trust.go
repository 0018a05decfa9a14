package rootfs

import (
	"errors"
	"maps"

	"golang.org/x/sys/unix"
)

// A template trusts the authorities of its root's /etc/ssl/certs: Debian's,
// and those addLocalCAs copied from the host (a company's, or a
// TLS-inspecting proxy's), which update-ca-certificates adds to the bundle
// and to the directory. curl, git, Python's ssl, Debian's pip, Node.js and
// npm read them there already. Deno reads its own list unless told
// otherwise, and so may Bun, a Node.js from elsewhere than Debian, and a
// library that brings certifi's list (httpx, from PyPI); behind such a
// proxy they fail with "UnknownIssuer" where curl succeeds.
//
// So a template whose root has the bundle gives its sandboxes, and its
// build's own steps, variables that point those at the same store.
//
// None of them names a variable the daemon sets for a command given a
// proxy-injected secret (internal/core/secretenv's trustEnv: SSL_CERT_FILE,
// REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE, GIT_SSL_CAINFO, NODE_EXTRA_CA_CERTS,
// DENO_CERT): a sandbox's own environment wins over those, and would then
// keep such a command from trusting the daemon's CA. Each of ours adds to
// what those say, or is what they fall back to:
//
//   - DENO_TLS_CA_STORE=system: Deno trusts the system's store, not the
//     list it was built with (it honours SSL_CERT_FILE and DENO_CERT too).
//   - NODE_USE_SYSTEM_CA=1: Node.js from 22.15 and Bun add the system's
//     store to their own; Debian's Node.js trusts the system's store
//     anyway, and ignores it.
//   - SSL_CERT_DIR=/etc/ssl/certs: OpenSSL's own default made explicit, so
//     httpx, which reads it when SSL_CERT_FILE is unset, uses it instead
//     of certifi's list.
//
// Requests installed from PyPI still reads certifi's list: only
// REQUESTS_CA_BUNDLE or CURL_CA_BUNDLE would point it elsewhere, and both
// are the daemon's for a command given a proxy-injected secret.
var bundleTrust = map[string]string{
	"DENO_TLS_CA_STORE":  "system",
	"NODE_USE_SYSTEM_CA": "1",
	"SSL_CERT_DIR":       "/" + systemCerts,
}

// systemCerts is Debian's directory of trusted authorities, one file
// each, and systemBundle, their bundle in it: what update-ca-certificates
// keeps.
const (
	systemCerts  = "etc/ssl/certs"
	systemBundle = systemCerts + "/ca-certificates.crt"
)

// withBundleTrust returns a copy of env with bundleTrust under it when
// root has Debian's bundle (the ca-certificates package), without when it
// has not: a variable naming a store the root lacks would have Deno trust
// nothing. What env sets wins (a Hutchfile's ENV).
func withBundleTrust(root string, env map[string]string) (map[string]string, error) {
	ok, err := hasBundle(root)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	if ok {
		maps.Copy(out, bundleTrust)
	}
	maps.Copy(out, env)
	return out, nil
}

// hasBundle reports whether root has the bundle as a regular file,
// reached without a symbolic link or a mount: one planted by a build's
// steps is as good as none, here as in every other step of the daemon's
// (see beneath.go).
func hasBundle(root string) (bool, error) {
	r, err := openRoot(root)
	if err != nil {
		return false, err
	}
	defer r.Close()
	how := &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: beneath}
	fd, err := unix.Openat2(r.fd, systemBundle, how)
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ELOOP), errors.Is(err, unix.EXDEV):
		return false, nil
	case err != nil:
		return false, r.pathError("open", systemBundle, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false, r.pathError("stat", systemBundle, err)
	}
	return st.Mode&unix.S_IFMT == unix.S_IFREG, nil
}
