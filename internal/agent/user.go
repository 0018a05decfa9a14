package agent

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"
)

// account is a user of the sandbox as /etc/passwd describes it.
type account struct {
	Name string
	UID  uint32
	GID  uint32
	Home string
	// Shell is the login shell; "" when passwd names none (see loginShell).
	Shell string
}

// requestUser returns the account a request acts as: the username override
// when set (the /files query parameter), else the user named by the request's
// "Authorization: Basic base64(<user>:)" header (as envd does), else the
// configured default user. An unknown user is an invalid argument.
func (s *server) requestUser(h http.Header, override string) (account, error) {
	name := override
	if name == "" {
		name = basicUser(h.Get("Authorization"))
	}
	return s.lookupUser(name)
}

// lookupUser returns the account of user name, "" meaning the configured
// default user (Hutch's service names its user in its requests).
func (s *server) lookupUser(name string) (account, error) {
	if name == "" {
		name = s.cfg.DefaultUser
	}
	data, err := s.accounts.read(s.cfg.PasswdFile)
	if err != nil {
		return account{}, connect.NewError(connect.CodeInternal, fmt.Errorf("read %s: %w", s.cfg.PasswdFile, err))
	}
	return lookupAccount(data, s.cfg.PasswdFile, name)
}

// basicUser extracts the username from a Basic authorization header value,
// or "" when there is none.
func basicUser(v string) string {
	scheme, cred, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return ""
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
	if err != nil {
		return ""
	}
	name, _, _ := strings.Cut(string(raw), ":")
	return name
}

// lookupAccount finds user name in data, the passwd file passwdFile.
func lookupAccount(data []byte, passwdFile, name string) (account, error) {
	for line := range bytes.Lines(data) {
		f := strings.Split(strings.TrimRight(string(line), "\r\n"), ":")
		if len(f) < 6 || f[0] != name {
			continue
		}
		uid, err1 := strconv.ParseUint(f[2], 10, 32)
		gid, err2 := strconv.ParseUint(f[3], 10, 32)
		if err := errors.Join(err1, err2); err != nil {
			return account{}, connect.NewError(connect.CodeInternal, fmt.Errorf("bad entry for user %q in %s: %w", name, passwdFile, err))
		}
		home := f[5]
		if home == "" {
			home = "/"
		}
		acct := account{Name: name, UID: uint32(uid), GID: uint32(gid), Home: filepath.Clean(home)}
		if len(f) > 6 {
			acct.Shell = f[6]
		}
		return acct, nil
	}
	return account{}, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("unknown user %q", name))
}

// loginShell is the account's login shell, /bin/sh when passwd names
// none, as login(1) does.
func (a account) loginShell() string {
	if a.Shell == "" {
		return "/bin/sh"
	}
	return a.Shell
}

// idNames maps user and group IDs to names for EntryInfo.owner and .group.
type idNames struct {
	users, groups map[uint32]string
}

// loadIDNames reads the passwd and group files; a file it cannot read just
// leaves IDs unnamed.
func (s *server) loadIDNames() idNames {
	return idNames{users: s.readIDFile(s.cfg.PasswdFile), groups: s.readIDFile(s.cfg.GroupFile)}
}

// readIDFile parses name:x:id:… lines, the shape passwd and group share.
func (s *server) readIDFile(path string) map[uint32]string {
	m := map[uint32]string{}
	data, err := s.accounts.read(path)
	if err != nil {
		return m
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		fields := strings.SplitN(sc.Text(), ":", 4)
		if len(fields) < 3 {
			continue
		}
		id, err := strconv.ParseUint(fields[2], 10, 32)
		if err != nil {
			continue
		}
		if _, dup := m[uint32(id)]; !dup {
			m[uint32(id)] = fields[0]
		}
	}
	return m
}

// accountFiles keeps the account files (passwd, group) that nearly every
// call reads, read again only when they change: under gVisor an open costs
// ~1.5 ms here (a round trip to its gofer) and a stat ~0.15 ms. Whether a
// file changed is told by inotify (see accountWatch), which costs no trip
// to the file system; where it cannot tell (no watch could be set, or the
// file is a symlink), by a stat compared with the last one: the file is
// taken as changed when its inode, size, modification or change time
// differ (useradd and its kin replace it by a rename, a new inode).
type accountFiles struct {
	mu     sync.Mutex
	files  map[string]accountFile
	watch  *accountWatch // nil until a read sets one, and after it broke
	closed bool          // the agent shut down: no new watch
}

// close ends the watch, for good: the agent is shutting down.
func (a *accountFiles) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	if a.watch != nil {
		a.watch.close()
		a.watch = nil
	}
	a.unwatchLocked()
}

// unwatchLocked has every file checked by its stat at its next read.
func (a *accountFiles) unwatchLocked() {
	for p, f := range a.files {
		f.watched = false
		a.files[p] = f
	}
}

type accountFile struct {
	stat    unix.Stat_t
	data    []byte
	watched bool // unchanged until the watch tells otherwise
}

// read returns the contents of path, from the cache while the file is
// unchanged.
func (a *accountFiles) read(path string) ([]byte, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.watch != nil && a.watch.changed() {
		// Something in the watched directories changed, or the watch
		// broke: every file is checked by its stat once more.
		a.unwatchLocked()
		if a.watch.broken {
			a.watch.close()
			a.watch = nil
		}
	}
	if f, ok := a.files[path]; ok && f.watched {
		return f.data, nil
	}
	// The watch is set before the stat: a change from then on is told.
	watched := a.watchLocked(path)
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return nil, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if f, ok := a.files[path]; ok && f.stat.Ino == st.Ino && f.stat.Dev == st.Dev && f.stat.Size == st.Size && f.stat.Mtim == st.Mtim && f.stat.Ctim == st.Ctim {
		f.watched = watched
		a.files[path] = f
		return f.data, nil
	}
	// Read after the stat: a change in between makes the next stat differ.
	data, err := os.ReadFile(path) // #nosec G304 -- the agent serves the sandbox's own files; paths resolve inside it
	if err != nil {
		return nil, err
	}
	if a.files == nil {
		a.files = map[string]accountFile{}
	}
	a.files[path] = accountFile{stat: st, data: data, watched: watched}
	return data, nil
}

// watchLocked has the watch follow path, and reports whether it does.
func (a *accountFiles) watchLocked(path string) bool {
	if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() {
		return false // a symlink's target may change unseen
	}
	if a.closed {
		return false
	}
	if a.watch == nil {
		w, err := newAccountWatch()
		if err != nil {
			return false
		}
		a.watch = w
	}
	return a.watch.add(path)
}

func (n idNames) user(id uint32) string  { return nameOr(n.users, id) }
func (n idNames) group(id uint32) string { return nameOr(n.groups, id) }

func nameOr(m map[uint32]string, id uint32) string {
	if name, ok := m[id]; ok {
		return name
	}
	return strconv.FormatUint(uint64(id), 10)
}

// resolvePath makes p absolute the way envd does: "" and "~" are the home
// directory, "~/x" and relative paths are relative to it. The result is
// cleaned. "~name" is not supported.
func resolvePath(p string, acct account) (string, error) {
	switch {
	case p == "" || p == "~":
		return acct.Home, nil
	case strings.HasPrefix(p, "~/"):
		return filepath.Join(acct.Home, p[2:]), nil
	case strings.HasPrefix(p, "~"):
		return "", connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("path %q: only ~ and ~/ are expanded", p))
	case filepath.IsAbs(p):
		return filepath.Clean(p), nil
	default:
		return filepath.Join(acct.Home, p), nil
	}
}

const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// processEnv builds a command's environment: a default PATH, overridden by
// the agent's own environment (minus HUTCH_AGENT_*), then HOME, USER and
// LOGNAME of the account, then the request's variables, which win.
func (s *server) processEnv(acct account, extra map[string]string) []string {
	var keys []string
	vals := map[string]string{}
	set := func(k, v string) {
		if _, ok := vals[k]; !ok {
			keys = append(keys, k)
		}
		vals[k] = v
	}
	set("PATH", defaultPath)
	for _, kv := range s.baseEnv {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			set(k, v)
		}
	}
	set("HOME", acct.Home)
	set("USER", acct.Name)
	set("LOGNAME", acct.Name)
	extraKeys := make([]string, 0, len(extra))
	for k := range extra {
		extraKeys = append(extraKeys, k)
	}
	slices.Sort(extraKeys)
	for _, k := range extraKeys {
		set(k, extra[k])
	}
	env := make([]string, 0, len(keys))
	for _, k := range keys {
		env = append(env, k+"="+vals[k])
	}
	return env
}
