package sqlrows

import (
	"encoding/json"
	"fmt"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// SecretColumns are a secret's columns, in the order of SecretArgs and
// ScanSecret. Values are stored only sealed.
const SecretColumns = `workspace, "user", name, description, inject, hosts, query, placeholder, sealed, created_at, updated_at`

// SecretArgs are s's values for SecretColumns.
func SecretArgs(s *store.Secret) ([]any, error) {
	hosts := s.Hosts
	if hosts == nil {
		hosts = []string{}
	}
	b, err := json.Marshal(hosts)
	if err != nil {
		return nil, err
	}
	return []any{
		s.Workspace, s.User, s.Name, s.Description, s.Inject, string(b), s.Query, s.Placeholder, s.Sealed,
		s.CreatedAt.UnixNano(), s.UpdatedAt.UnixNano(),
	}, nil
}

// ScanSecret reads a row of SecretColumns.
func ScanSecret(row Scanner) (*store.Secret, error) {
	var (
		s                store.Secret
		hosts            string
		created, updated int64
	)
	if err := row.Scan(&s.Workspace, &s.User, &s.Name, &s.Description, &s.Inject, &hosts, &s.Query, &s.Placeholder,
		&s.Sealed, &created, &updated); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(hosts), &s.Hosts); err != nil {
		return nil, fmt.Errorf("decode hosts of %s: %w", DescribeSecret(s.Workspace, s.User, s.Name), err)
	}
	if len(s.Hosts) == 0 {
		s.Hosts = nil
	}
	s.CreatedAt = Time(created)
	s.UpdatedAt = Time(updated)
	return &s, nil
}

// SecretNotFound is ErrNotFound for a secret (user "" for the workspace's
// own).
func SecretNotFound(workspace, user, name string) error {
	if user == "" {
		return errdefs.NotFound("workspace %s has no secret %s", workspace, name)
	}
	return errdefs.NotFound("user %s of workspace %s has no personal secret %s", user, workspace, name)
}

// DescribeSecret names a secret in an error.
func DescribeSecret(workspace, user, name string) string {
	if user == "" {
		return fmt.Sprintf("secret %s of workspace %s", name, workspace)
	}
	return fmt.Sprintf("personal secret %s of user %s in workspace %s", name, user, workspace)
}
