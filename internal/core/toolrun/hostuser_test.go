package toolrun

import (
	"os"
	"strings"
	"testing"
)

// Who tool calls on the host run as: never root, by name, number or a
// directory's owner; a daemon that is not root runs them as itself.
func TestResolveHostUser(t *testing.T) {
	rootsDir, nobodysDir := t.TempDir(), hostDir(t)
	if os.Geteuid() != 0 {
		self := HostUser{os.Geteuid(), os.Getegid()}
		if got, err := ResolveHostUser("", rootsDir); err != nil || got != self {
			t.Errorf("a daemon that is not root: %v, %v; want itself, %v", got, err, self)
		}
		if _, err := ResolveHostUser("0", rootsDir); err == nil || !strings.Contains(err.Error(), "never run as root") {
			t.Errorf("a daemon that is not root, asked for root: %v", err)
		}
		t.Skip("the rest needs root: a daemon that is not root runs host calls as itself")
	}
	tests := []struct {
		name, user, dir string
		want            HostUser
		wantErr         string
	}{
		{"root by name", "root", nobodysDir, HostUser{}, "never run as root"},
		{"root by number", "0", nobodysDir, HostUser{}, "never run as root"},
		{"root's group", "65534:0", nobodysDir, HostUser{}, "never run as root"},
		{"a uid and gid", "65534:65534", nobodysDir, HostUser{nobody, nobody}, ""},
		{"no such user", "no-such-user-here", nobodysDir, HostUser{}, "tools_host_user"},
		{"a gid not a number", "65534:no-such-group-here", nobodysDir, HostUser{}, "tools_host_user"},
		{"the directory's owner", "", nobodysDir, HostUser{nobody, nobody}, ""},
		{"a directory of root's", "", rootsDir, HostUser{}, "belongs to root"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ResolveHostUser(tc.user, tc.dir)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("ResolveHostUser(%q) = %v, %v; want an error saying %q", tc.user, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("ResolveHostUser(%q) = %v, %v; want %v", tc.user, got, err, tc.want)
			}
		})
	}
}
