package fake

import (
	"testing"

	"github.com/hutchdev/hutch/internal/storage/rootfs"
)

// The fake's roots have the sandbox user the templates' roots have.
func TestUserAsTemplatesHaveIt(t *testing.T) {
	t.Parallel()
	if userName != rootfs.UserName || userUID != rootfs.UserUID || userGID != rootfs.UserGID ||
		userHome != rootfs.UserHome || workspace != rootfs.Workspace {
		t.Errorf("the fake's user %s (%d:%d, %s, %s), the templates' %s (%d:%d, %s, %s)",
			userName, userUID, userGID, userHome, workspace,
			rootfs.UserName, rootfs.UserUID, rootfs.UserGID, rootfs.UserHome, rootfs.Workspace)
	}
}
