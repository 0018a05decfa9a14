package rootfs

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// SourceSnapshot is a template made from a sandbox: the root of the version
// it was made from, with what the sandbox changed applied. Sandboxes start
// from it with its files in place (a snapshot, a fork). Under gVisor it
// holds the sandbox's memory too (Info.MemoryRuntime), in directory memory
// beside the root: sandboxes of that runtime restore its processes.
const SourceSnapshot = "snapshot"

// memory is where a snapshot's memory image goes.
func (b *Build) memory() string { return filepath.Join(b.dir, "memory") }

// Snapshot makes a new version of template name from parent, a version of
// a template, and apply, which writes a sandbox's changes into the new root
// (which starts as parent's, sharing its files) and may save its memory
// into directory memory (saved), under runtime. A name that another kind
// of template has is a conflict: a snapshot does not replace a build.
func (s *Store) Snapshot(ctx context.Context, name string, parent Template, sandboxID, runtime string, apply func(root, memory string) (saved bool, err error)) (_ Info, err error) {
	if cur, err := s.Info(name); err == nil && cur.Source != SourceSnapshot {
		return Info{}, errdefs.Conflict("template %s exists and is not a snapshot; choose another name", name)
	}
	parentInfo := s.info // the host template's
	if parent.Name != HostName {
		if parentInfo, err = s.versionInfo(parent.Name, parent.Version); err != nil {
			return Info{}, err
		}
	}
	b, err := s.Begin(name)
	if err != nil {
		return Info{}, err
	}
	defer func() { err = b.fail(ctx, err) }()
	if err := linkTree(parent.RootDir, b.Root()); err != nil {
		return Info{}, fmt.Errorf("snapshot %s: share the root of %s: %w", name, parent.Name, err)
	}
	saved, err := apply(b.Root(), b.memory())
	if err != nil {
		return Info{}, err
	}
	info := Info{
		Source: SourceSnapshot, Parent: parent.Name + "@" + parent.Version, Sandbox: sandboxID,
		Env: parentInfo.Env, Suite: parentInfo.Suite, Mirror: parentInfo.Mirror, Skeleton: parentInfo.Skeleton,
	}
	if saved {
		info.MemoryRuntime = runtime
	}
	return b.Commit(info)
}

// onHost says whether a snapshot's root stands on the host template's, whose
// sandboxes see the host's /usr by binds: its sandboxes need them too.
func (info Info) onHost() bool {
	return info.Source == SourceSnapshot && strings.HasPrefix(info.Parent, HostName+"@")
}
