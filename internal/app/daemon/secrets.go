package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/hutchdev/hutch/internal/base/redact"
	"github.com/hutchdev/hutch/internal/core/secretenv"
	"github.com/hutchdev/hutch/internal/storage/store"
	"github.com/hutchdev/hutch/internal/trust/secrets"
)

// openVault opens the secrets' vault under the master key src names, and
// keeps redactor holding every value it keeps, from now and after each
// change. A wrong or missing master key stops the daemon at start, saying
// so: no secret is touched. The source it returns gives sandboxes'
// commands their secrets.
func openVault(ctx context.Context, st store.Secrets, src secrets.KeySource, redactor *redact.Redactor, log *slog.Logger) (*secrets.Vault, *secretSource, error) {
	vault, err := secrets.Open(ctx, st, src, log)
	if err != nil {
		return nil, nil, fmt.Errorf("open the secrets: %w", err)
	}
	source := &secretSource{vault: vault}
	refresh := func() error {
		source.forget()
		plains, err := vault.Plaintexts(context.WithoutCancel(ctx))
		if err != nil {
			return err
		}
		set := make([]redact.Secret, 0, len(plains))
		for _, p := range plains {
			set = append(set, redact.Secret{Name: p.Name, Value: p.Value})
		}
		redactor.Replace(set)
		return nil
	}
	if err := refresh(); err != nil {
		return nil, nil, fmt.Errorf("read the secrets: %w", err)
	}
	vault.OnChange(func() {
		if err := refresh(); err != nil {
			log.Error("secrets changed, but the redactor could not read them: answers and logs may show them", "error", err)
		}
	})
	return vault, source, nil
}

// secretSource is secretenv.Source on the vault. What a workspace's
// user resolves to is kept until a secret changes: a command's start
// costs no decryption.
type secretSource struct {
	vault *secrets.Vault
	mu    sync.Mutex
	known map[[2]string][]secrets.Resolved // by workspace and user
}

var _ secretenv.Source = (*secretSource)(nil)

// forget drops what is kept: a secret changed.
func (s *secretSource) forget() {
	s.mu.Lock()
	s.known = nil
	s.mu.Unlock()
}

func (s *secretSource) resolve(ctx context.Context, ws, user string) ([]secrets.Resolved, error) {
	key := [2]string{ws, user}
	s.mu.Lock()
	res, ok := s.known[key]
	s.mu.Unlock()
	if ok {
		return res, nil
	}
	res, err := s.vault.Resolve(ctx, ws, user, nil)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.known == nil {
		s.known = map[[2]string][]secrets.Resolved{}
	}
	s.known[key] = res
	s.mu.Unlock()
	return res, nil
}

// ForCommand gives a command its secrets. A name the sandbox was
// narrowed to that is gone since is left out.
func (s *secretSource) ForCommand(ctx context.Context, ws, user string, names []string) (secretenv.SecretEnv, error) {
	res, err := s.resolve(ctx, ws, user)
	if err != nil {
		return secretenv.SecretEnv{}, err
	}
	out := secretenv.SecretEnv{Env: map[string]string{}}
	for _, r := range res {
		if names != nil && !slices.Contains(names, r.Name) {
			continue
		}
		out.Env[r.Name] = r.EnvValue()
		if r.Inject == secrets.InjectProxy {
			out.Swaps = append(out.Swaps, secretenv.Swap{Placeholder: r.Placeholder, Value: r.Value, Hosts: r.Hosts, Query: r.Query})
		}
	}
	return out, nil
}

// Check says which of names neither the workspace nor user has: a
// sandbox cannot be narrowed to a secret that is not there.
func (s *secretSource) Check(ctx context.Context, ws, user string, names []string) error {
	_, err := s.vault.Resolve(ctx, ws, user, names)
	return err
}
