package sandbox

import (
	"fmt"
	"path"
	"strings"

	"github.com/hutchdev/hutch/internal/backend"
	"github.com/hutchdev/hutch/internal/template"
)

// Bounds of the files a create places in the workspace.
const (
	maxCreateFiles     = 1000
	maxCreateFileBytes = 8 << 20 // together; a JSON body is at most this anyway
)

// workspaceFiles turns the files of a create (paths in the workspace, or
// absolute under it, to their text) into files of the sandbox's writable
// layer, owned by the sandbox user, with the directories between made
// too. A path that leaves the workspace is refused.
func workspaceFiles(files map[string]string) (map[string]backend.File, error) {
	if len(files) > maxCreateFiles {
		return nil, fmt.Errorf("files: at most %d, got %d", maxCreateFiles, len(files))
	}
	out := map[string]backend.File{}
	total := 0
	for p, text := range files {
		abs := workspacePath(p)
		if p == "" || !strings.HasPrefix(abs, template.Workspace+"/") {
			return nil, fmt.Errorf("files: %q is not a path in %s", p, template.Workspace)
		}
		if total += len(text); total > maxCreateFileBytes {
			return nil, fmt.Errorf("files: more than %d MiB together", maxCreateFileBytes>>20)
		}
		if f, ok := out[abs]; ok && f.Dir {
			return nil, fmt.Errorf("files: %q is both a file and a directory", abs)
		}
		out[abs] = backend.File{Data: []byte(text), Mode: 0o644, UID: template.UserUID, GID: template.UserGID}
		for dir := path.Dir(abs); dir != template.Workspace; dir = path.Dir(dir) {
			if f, ok := out[dir]; ok && !f.Dir {
				return nil, fmt.Errorf("files: %q is both a file and a directory", dir)
			}
			out[dir] = backend.File{Dir: true, Mode: 0o755, UID: template.UserUID, GID: template.UserGID}
		}
	}
	return out, nil
}
