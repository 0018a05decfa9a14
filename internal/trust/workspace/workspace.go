// Package workspace names the tenants of one daemon and the objects they
// own. Every API key but the daemon's own belongs to one workspace, and
// what a key makes (sandboxes, volumes, templates, snapshots, secrets)
// belongs to that workspace: another workspace's key finds none of it.
//
// Sandboxes and secrets carry their workspace in their records. Volumes
// and templates live in one namespace of names (directories on disk,
// names in Hutchfiles and sandboxes' records), so a workspace's own are
// kept under a qualified name, NAME~WORKSPACE: names users give cannot
// hold '~', so two workspaces' "data" volumes never meet, and a name a
// workspace picks says nothing of the others'. ('@' would read better,
// but it already joins a template's name and version: "base@2026…".) Templates without a
// qualifier are shared: the built-in ones and those the administrator
// makes; every workspace may use them and none may change them.
package workspace

import (
	"regexp"
	"strings"
	"sync"

	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// Default is the workspace of keys made before workspaces existed, and
// the one the administrator acts in unless it names another. Its
// volumes keep their plain names, as before.
const Default = "default"

// validName is what a workspace may be called: part of qualified names,
// so no '~', and short. Like every pattern of this binary that the
// agent does not use, it is compiled on first use, not at start: a
// counted repetition compiles into thousands of nodes, which each
// sandbox's agent and shims (this binary) would pay for nothing.
var validName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`) })

// Check says why name cannot be a workspace's name, or nil.
func Check(name string) error {
	if !validName().MatchString(name) {
		return errdefs.InvalidArgument("workspace name %q: use 1 to 63 of a-z, 0-9 and '-', starting with a letter or digit", name)
	}
	return nil
}

// separator joins a name and its workspace.
const separator = "~"

// Qualify is the name under which workspace ws keeps its own object name.
func Qualify(name, ws string) string { return name + separator + ws }

// Split is a qualified name's parts; ws is "" for a name without a
// qualifier.
func Split(qualified string) (name, ws string) {
	name, ws, _ = strings.Cut(qualified, separator)
	return name, ws
}

// Qualified says whether a name a user gave holds a qualifier, which no
// name a user gives may: such a name is nobody's, not another
// workspace's object.
func Qualified(name string) bool { return strings.Contains(name, separator) }

// Volume is the stored name of workspace ws's volume name: the Default
// workspace's keep their plain names (volumes made before workspaces
// existed are its own).
func Volume(name, ws string) string {
	if ws == Default {
		return name
	}
	return Qualify(name, ws)
}

// VolumeOwner is the workspace that owns the volume stored as stored.
func VolumeOwner(stored string) string {
	if _, ws := Split(stored); ws != "" {
		return ws
	}
	return Default
}

// validUser is what a product's user id may be: the product's own ids
// ("u-42", an email address), printable and short.
var validUser = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$`) })

// CheckUser says why user cannot name a product's user, or nil. The
// product authenticates its users; Hutch only keeps their personal
// secrets apart and records who a call was for.
func CheckUser(user string) error {
	if !validUser().MatchString(user) {
		return errdefs.InvalidArgument("user %q: use 1 to 128 of A-Z, a-z, 0-9 and . _ @ + -, starting with a letter or digit", user)
	}
	return nil
}
