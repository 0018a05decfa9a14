// Package secrets is the vault: secrets set per workspace, shared by its
// team (scope workspace) or one user's own (scope user, which overrides a
// workspace secret of the same name for that user), stored encrypted, and
// given to a sandbox's commands when they run.
//
// What it protects against: someone who reads the database, a backup of
// it or its WAL learns no value, only names, descriptions, hosts and
// times. Someone who can also write it cannot move a sealed value to
// another secret, workspace or user, nor send a proxy secret to other
// hosts: each value is sealed with AES-256-GCM under the master key, with
// the secret's workspace, scope, user, name, inject and hosts as
// associated data. Someone who holds the master key and the database has
// every value; the key lives apart from the database for that reason (a
// 0600 file, or the environment), and a backup should keep them apart.
//
// The master key is never stored in the database; a known constant sealed
// under it is (the key check), so that a wrong or missing key is an error
// at start, with nothing changed, rather than secrets that no longer open.
// A rotation (RotateMaster) writes the next key beside the current one
// (<file>.new), reseals every value and the check in one transaction, and
// only then moves the next key over the current one; Open finishes or
// forgets a rotation a crash interrupted, so that no value is lost.
//
// A secret reaches a sandbox as an environment variable of its commands
// (inject env), or, with inject proxy, as a placeholder in that variable
// which the daemon's egress proxy swaps for the value only on connections
// to the secret's hosts, so that the value never enters the sandbox.
//
// Values, sealed values and the key are never logged nor put in an error.
package secrets

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// Scopes of a secret.
const (
	ScopeWorkspace = "workspace"
	ScopeUser      = "user"
)

// How a secret reaches a sandbox.
const (
	InjectEnv   = store.InjectEnv
	InjectProxy = store.InjectProxy
)

// Attribute keys for logs.
const (
	attrWorkspace = "workspace"
	attrUser      = "user"
	attrSecret    = "secret"
	attrKey       = "master_key"
)

// SetRequest sets a secret. User "" sets the workspace's own.
type SetRequest struct {
	Workspace   string
	User        string
	Name        string
	Description string
	Value       []byte
	// Inject is InjectEnv (when "") or InjectProxy.
	Inject string
	// Hosts are the hosts a proxy secret is for.
	Hosts []string
	// Query: a proxy secret is swapped in query strings too.
	Query bool
}

// Info is a secret as a listing shows it: never its value.
type Info struct {
	Workspace   string
	Scope       string // ScopeWorkspace or ScopeUser
	User        string // "" for scope workspace
	Name        string
	Description string
	Inject      string
	Hosts       []string
	Query       bool
	// Placeholder is what a proxy secret's variable holds in a sandbox
	// (not secret).
	Placeholder string
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// Resolved is a secret as a sandbox's command gets it.
type Resolved struct {
	Name  string
	Scope string // which one won: ScopeUser over ScopeWorkspace
	// Inject is InjectEnv or InjectProxy.
	Inject string
	// Value is the value: the variable's for inject env, the proxy's to
	// put in place of Placeholder on connections to Hosts for inject
	// proxy.
	Value       string
	Placeholder string
	Hosts       []string
	Query       bool
}

// EnvValue is what the sandbox's variable Name holds: the value, or for a
// proxy secret its placeholder.
func (r Resolved) EnvValue() string {
	if r.Inject == InjectProxy {
		return r.Placeholder
	}
	return r.Value
}

// String hides the value, should a Resolved be printed.
func (r Resolved) String() string { return "secret " + r.Name + " (value hidden)" }

// GoString hides the value from %#v.
func (r Resolved) GoString() string { return r.String() }

// LogValue hides the value from slog.
func (r Resolved) LogValue() slog.Value { return slog.StringValue(r.String()) }

// Plain is one secret's value, for the redactor that hides values in what
// sandboxes print.
type Plain struct {
	Name  string
	Value string
}

// String hides the value, should a Plain be printed.
func (p Plain) String() string { return "secret " + p.Name + " (value hidden)" }

// GoString hides the value from %#v.
func (p Plain) GoString() string { return p.String() }

// LogValue hides the value from slog.
func (p Plain) LogValue() slog.Value { return slog.StringValue(p.String()) }

// Vault seals, keeps and opens secrets. Its methods are safe for
// concurrent use; one daemon's vault is the only writer of its store's
// secrets (a rotation by another would be refused by ResealAll, not lost).
type Vault struct {
	store store.Secrets
	src   KeySource
	log   *slog.Logger

	// mu is held for writing by Set, Delete and RotateMaster, for reading
	// by what opens values: a rotation never runs beside them.
	mu       sync.RWMutex
	sealer   *sealer
	onChange func()
}

// OnChange sets f to be called after every Set, Delete and RotateMaster
// that changed something, outside the vault's lock (f may call
// Plaintexts): the daemon keeps its redactor up to date with it.
func (v *Vault) OnChange(f func()) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.onChange = f
}

// changed ends a write: unlocks and calls the OnChange hook.
func (v *Vault) changed() {
	f := v.onChange
	v.mu.Unlock()
	if f != nil {
		f()
	}
}

// Set seals and stores a secret, replacing one of the same workspace,
// user and name (whose placeholder, for a proxy secret that stays one, is
// kept: a running sandbox's stays good).
func (v *Vault) Set(ctx context.Context, req SetRequest) (Info, error) {
	if err := checkOwner(req.Workspace, req.User); err != nil {
		return Info{}, err
	}
	if err := checkName(req.Name); err != nil {
		return Info{}, err
	}
	if err := checkDescription(req.Description); err != nil {
		return Info{}, err
	}
	if err := checkValue(req.Value); err != nil {
		return Info{}, err
	}
	inject, hosts, err := checkInject(req.Inject, req.Hosts)
	if err != nil {
		return Info{}, err
	}
	if req.Query && inject != InjectProxy {
		return Info{}, errdefs.InvalidArgument("query is only for a secret with inject proxy")
	}
	now := time.Now().UTC()
	rec := &store.Secret{
		Workspace: req.Workspace, User: req.User, Name: req.Name, Description: req.Description,
		Inject: inject, Hosts: hosts, Query: req.Query, CreatedAt: now, UpdatedAt: now,
	}

	v.mu.Lock()
	if inject == InjectProxy {
		old, err := v.store.GetSecret(ctx, rec.Workspace, rec.User, rec.Name)
		switch {
		case err == nil && old.Inject == InjectProxy && old.Placeholder != "":
			rec.Placeholder = old.Placeholder
		case err == nil || errors.Is(err, errdefs.ErrNotFound):
			rec.Placeholder = newPlaceholder(rec.Name)
		default:
			v.mu.Unlock()
			return Info{}, err
		}
	}
	rec.Sealed = v.sealer.seal(req.Value, secretAD(rec))
	if err := v.store.PutSecret(ctx, rec); err != nil {
		v.mu.Unlock()
		return Info{}, err
	}
	v.changed()
	v.log.Info("secret set", attrWorkspace, rec.Workspace, attrUser, rec.User, attrSecret, rec.Name, "inject", rec.Inject)
	return info(rec), nil
}

// List lists what a caller of workspace sees: the workspace's secrets,
// and user's personal ones (none for user ""), by user and name. A
// personal secret and the workspace's of the same name are both listed.
func (v *Vault) List(ctx context.Context, workspace, user string) ([]Info, error) {
	if err := checkOwner(workspace, user); err != nil {
		return nil, err
	}
	recs, err := v.store.ListSecrets(ctx, workspace)
	if err != nil {
		return nil, err
	}
	out := []Info{}
	for _, r := range recs {
		if r.User == "" || r.User == user {
			out = append(out, info(r))
		}
	}
	return out, nil
}

// ListAll lists the secrets of workspace, of every scope and user ("" for
// every workspace's): what an administrator sees.
func (v *Vault) ListAll(ctx context.Context, workspace string) ([]Info, error) {
	recs, err := v.store.ListSecrets(ctx, workspace)
	if err != nil {
		return nil, err
	}
	out := make([]Info, 0, len(recs))
	for _, r := range recs {
		out = append(out, info(r))
	}
	return out, nil
}

// Delete removes a secret (user "" for the workspace's own);
// errdefs.ErrNotFound if there is none.
func (v *Vault) Delete(ctx context.Context, workspace, user, name string) error {
	if err := checkOwner(workspace, user); err != nil {
		return err
	}
	if err := checkName(name); err != nil {
		return err
	}
	v.mu.Lock()
	if err := v.store.DeleteSecret(ctx, workspace, user, name); err != nil {
		v.mu.Unlock()
		return err
	}
	v.changed()
	v.log.Info("secret deleted", attrWorkspace, workspace, attrUser, user, attrSecret, name)
	return nil
}

// Resolve returns the secrets a command of user in workspace gets: the
// workspace's, each overridden by user's personal secret of the same name
// (user "" gets the workspace's alone), by name. With names not nil, only
// those; a name that neither has is an errdefs.ErrInvalidArgument naming
// every such name: the caller asked for something that is not there in
// the request that names it (a sandbox, a command), whose own resource
// exists, so it is a bad argument rather than a missing resource.
func (v *Vault) Resolve(ctx context.Context, workspace, user string, names []string) ([]Resolved, error) {
	if err := checkOwner(workspace, user); err != nil {
		return nil, err
	}
	for _, n := range names {
		if err := checkName(n); err != nil {
			return nil, err
		}
	}
	v.mu.RLock()
	defer v.mu.RUnlock()
	recs, err := v.store.ListSecrets(ctx, workspace)
	if err != nil {
		return nil, err
	}
	chosen := map[string]*store.Secret{}
	for _, r := range recs {
		if r.User != "" && r.User != user {
			continue // another user's own
		}
		if cur, ok := chosen[r.Name]; ok && cur.User != "" {
			continue // a personal one is chosen already
		}
		chosen[r.Name] = r
	}
	if names != nil {
		wanted := map[string]*store.Secret{}
		var missing []string
		for _, n := range names {
			if r, ok := chosen[n]; ok {
				wanted[n] = r
			} else if !slices.Contains(missing, n) {
				missing = append(missing, n)
			}
		}
		if len(missing) > 0 {
			return nil, missingError(workspace, user, missing)
		}
		chosen = wanted
	}
	out := make([]Resolved, 0, len(chosen))
	for _, r := range chosen {
		value, err := v.sealer.open(r.Sealed, secretAD(r))
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", describe(r), err)
		}
		out = append(out, Resolved{
			Name: r.Name, Scope: scopeOf(r.User), Inject: r.Inject, Value: string(value),
			Placeholder: r.Placeholder, Hosts: slices.Clone(r.Hosts), Query: r.Query,
		})
		clear(value)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func missingError(workspace, user string, missing []string) error {
	slices.Sort(missing)
	noun := "no secret named"
	if len(missing) > 1 {
		noun = "no secrets named"
	}
	where := "workspace " + workspace
	if user != "" {
		where += " (nor among the personal secrets of user " + user + ")"
	}
	return errdefs.InvalidArgument("%s %s in %s; set it first (hutch secret set), or leave it out", noun, strings.Join(missing, ", "), where)
}

// Plaintexts returns every value of every workspace, for the daemon's
// redactor. Keep them in memory only.
func (v *Vault) Plaintexts(ctx context.Context) ([]Plain, error) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	recs, err := v.store.ListSecrets(ctx, "")
	if err != nil {
		return nil, err
	}
	out := make([]Plain, 0, len(recs))
	for _, r := range recs {
		value, err := v.sealer.open(r.Sealed, secretAD(r))
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", describe(r), err)
		}
		out = append(out, Plain{Name: r.Name, Value: string(value)})
		clear(value)
	}
	return out, nil
}

func info(r *store.Secret) Info {
	return Info{
		Workspace: r.Workspace, Scope: scopeOf(r.User), User: r.User, Name: r.Name,
		Description: r.Description, Inject: r.Inject, Hosts: slices.Clone(r.Hosts), Query: r.Query, Placeholder: r.Placeholder,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
}

func scopeOf(user string) string {
	if user == "" {
		return ScopeWorkspace
	}
	return ScopeUser
}

// describe names a secret in an error or a log.
func describe(r *store.Secret) string {
	if r.User == "" {
		return fmt.Sprintf("secret %s of workspace %s", r.Name, r.Workspace)
	}
	return fmt.Sprintf("personal secret %s of user %s in workspace %s", r.Name, r.User, r.Workspace)
}

// removeIfThere removes path, which may be absent.
func removeIfThere(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
