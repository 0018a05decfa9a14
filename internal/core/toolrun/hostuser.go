package toolrun

import (
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
	"syscall"
)

// HostUser is who tool calls on the host run as, and owns what they make:
// never root, whose uid reads the daemon's API key and whose gid reads
// what group root may.
type HostUser struct {
	UID, GID int
}

func (u HostUser) String() string { return fmt.Sprintf("uid %d gid %d", u.UID, u.GID) }

// ResolveHostUser says who tool calls on the host, in dir, run as: name
// (a user name, a uid, or uid:gid) when it is given, else whoever owns dir
// with their primary group, so that what the calls make belongs to the
// directory's owner and the directory stays theirs to use. A daemon that
// is not root cannot switch users: its calls run as itself, and a name
// that is someone else is refused. Root, by uid or gid, is refused
// always: a root-owned dir needs its owner changed, or a name.
func ResolveHostUser(name, dir string) (HostUser, error) {
	self := HostUser{UID: os.Geteuid(), GID: os.Getegid()}
	var u HostUser
	switch {
	case name != "":
		var err error
		if u, err = lookupHostUser(name); err != nil {
			return HostUser{}, fmt.Errorf("tools_host_user %q: %w", name, err)
		}
	case self.UID != 0:
		u = self
	default:
		fi, err := os.Stat(dir)
		if err != nil {
			return HostUser{}, fmt.Errorf("tools_host_dir: %w", err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return HostUser{}, fmt.Errorf("tools_host_dir %s: no owner to run tool calls as", dir)
		}
		u = HostUser{UID: int(st.Uid), GID: int(st.Gid)}
		if pw, err := user.LookupId(strconv.Itoa(u.UID)); err == nil {
			if gid, err := strconv.Atoi(pw.Gid); err == nil {
				u.GID = gid
			}
		}
		if u.UID == 0 {
			return HostUser{}, fmt.Errorf("tools_host_dir %s belongs to root, and tool calls on the host never run as root: "+
				"give the directory to the user they should run as (chown -R USER: %s) or name one with tools_host_user", dir, dir)
		}
	}
	switch {
	case u.UID == 0 || u.GID == 0:
		return HostUser{}, fmt.Errorf("tool calls on the host never run as root, and %s is (uid or gid 0): name another user with tools_host_user", u)
	case self.UID != 0 && u != self:
		return HostUser{}, fmt.Errorf("the daemon runs as %s, not root, and cannot run tool calls on the host as %s: leave tools_host_user unset to run them as the daemon's user", self, u)
	}
	return u, nil
}

// lookupHostUser is the user name names: a user name, a uid (with its
// primary group, or the group of the same number), or uid:gid.
func lookupHostUser(name string) (HostUser, error) {
	uidText, gidText, hasGID := strings.Cut(name, ":")
	uid, err := strconv.Atoi(uidText)
	if err != nil {
		pw, err := user.Lookup(uidText)
		if err != nil {
			return HostUser{}, err
		}
		uidText = pw.Uid
		if !hasGID {
			gidText, hasGID = pw.Gid, true
		}
		if uid, err = strconv.Atoi(uidText); err != nil {
			return HostUser{}, fmt.Errorf("uid %q: %w", uidText, err)
		}
	}
	gid := uid
	switch {
	case hasGID:
		if gid, err = strconv.Atoi(gidText); err != nil {
			gr, err := user.LookupGroup(gidText)
			if err != nil {
				return HostUser{}, err
			}
			if gid, err = strconv.Atoi(gr.Gid); err != nil {
				return HostUser{}, fmt.Errorf("gid %q: %w", gr.Gid, err)
			}
		}
	default:
		if pw, err := user.LookupId(uidText); err == nil {
			if g, err := strconv.Atoi(pw.Gid); err == nil {
				gid = g
			}
		}
	}
	if uid < 0 || gid < 0 {
		return HostUser{}, fmt.Errorf("uid and gid must not be negative")
	}
	return HostUser{UID: uid, GID: gid}, nil
}
