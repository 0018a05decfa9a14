// Package apikeys keeps the API keys besides the daemon's own: each acts in
// one workspace (internal/trust/workspace), whose objects are all it sees, and
// names the least isolated sandbox mode its tool calls may use, so that one
// embedding app's key can be let run calls on the host and another's kept
// to the sandbox. Only a hash of each key is stored; the key is shown
// once, when made. A service beside the sandbox core: it needs no sandbox.
package apikeys

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/hutchdev/hutch/internal/agent/tools"
	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/net/netpolicy"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
	"github.com/hutchdev/hutch/internal/storage/store"
	"github.com/hutchdev/hutch/internal/trust/workspace"
)

// Store is what the service keeps keys in (store.Store has it).
type Store interface {
	CreateAPIKey(ctx context.Context, k *store.APIKey) error
	ListAPIKeys(ctx context.Context) ([]*store.APIKey, error)
	APIKeyByHash(ctx context.Context, hash string) (*store.APIKey, error)
	DeleteAPIKey(ctx context.Context, name string) error
	EnsureWorkspace(ctx context.Context, name string, at time.Time) (*store.Workspace, error)
	GetWorkspace(ctx context.Context, name string) (*store.Workspace, error)
}

// Key is an API key as callers see it: not the key, nor its hash.
type Key struct {
	Name string
	// ToolsMode is the least isolated sandbox mode its tool calls may use.
	ToolsMode string
	// NetworkMode is the least isolated network mode its sandboxes may
	// ask for.
	NetworkMode string
	// Workspace is the workspace it acts in.
	Workspace string
	CreatedAt time.Time
}

// Service makes, lists, finds and removes keys.
type Service struct {
	store Store
	log   *slog.Logger
}

// New returns a Service over s; log may be nil.
func New(s Store, log *slog.Logger) *Service {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{store: s, log: log}
}

// CreateRequest says what key to make.
type CreateRequest struct {
	Name string
	// Workspace is the workspace it acts in, made on first use. Empty: a
	// new workspace of the key's own name (see keyWorkspace). Never
	// workspace.Default, which is the administrator's.
	Workspace string
	// ToolsMode: its tool calls may use this mode or a more isolated one
	// (default: tools.ModeAll).
	ToolsMode string
	// NetworkMode: its sandboxes may ask for this mode or a more isolated
	// one (default: full).
	NetworkMode string
	// Own: the name is its workspace's own, kept qualified with it
	// (workspace.Qualify) as volumes' and templates' are, so that the
	// names a workspace's keys pick say nothing of another's (a key
	// making keys: see internal/front/api). Workspace must be given.
	Own bool
}

// Create makes a key as req says. It returns the key.
func (s *Service) Create(ctx context.Context, req CreateRequest) (string, *Key, error) {
	name, ws, toolsMode, networkMode := req.Name, req.Workspace, req.ToolsMode, req.NetworkMode
	if err := rootfs.CheckName(name); err != nil {
		return "", nil, errdefs.InvalidArgument("key name: %v", err)
	}
	ws, err := s.keyWorkspace(ctx, name, ws)
	if err != nil {
		return "", nil, err
	}
	if req.Own {
		name = workspace.Qualify(name, ws)
	}
	if toolsMode == "" {
		toolsMode = tools.ModeAll
	}
	if !tools.ValidMode(toolsMode) {
		return "", nil, errdefs.InvalidArgument("tools_mode must be all, selective or off, got %q", toolsMode)
	}
	if networkMode == "" {
		networkMode = string(netpolicy.Full)
	}
	if _, err := netpolicy.ParseMode(networkMode); err != nil {
		return "", nil, errdefs.InvalidArgument("network_mode: %v", err)
	}
	if networkMode == string(netpolicy.Learn) {
		return "", nil, errdefs.InvalidArgument("network_mode learn is a sandbox's, not a key's ceiling: give full, which lets its sandboxes ask for learn")
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", nil, err
	}
	key := "hutch_" + hex.EncodeToString(raw)
	now := time.Now().UTC()
	if _, err := s.store.EnsureWorkspace(ctx, ws, now); err != nil {
		return "", nil, err
	}
	rec := &store.APIKey{Name: name, Hash: hashKey(key), ToolsMode: toolsMode, NetworkMode: networkMode, Workspace: ws, CreatedAt: now}
	if err := s.store.CreateAPIKey(ctx, rec); err != nil {
		return "", nil, err
	}
	s.log.Info("API key made", "name", name, "workspace", ws, "tools_mode", toolsMode, "network_mode", networkMode)
	return key, view(rec), nil
}

// keyWorkspace is the workspace a key named name acts in when it asks for
// ws. The Default workspace is the administrator's: its sandboxes,
// volumes and secrets are no key's. A key that names no workspace gets a
// new one of its own name; joining one that exists is sharing, which a
// caller asks for by naming it.
func (s *Service) keyWorkspace(ctx context.Context, name, ws string) (string, error) {
	switch {
	case ws == workspace.Default:
		return "", errdefs.PermissionDenied("workspace %s is the administrator's: a key acts in a workspace of its own; name one (--workspace NAME) or none for a new one called %s", workspace.Default, name)
	case ws != "":
		return ws, workspace.Check(ws)
	}
	if err := workspace.Check(name); err != nil {
		return "", errdefs.InvalidArgument("key %s names no workspace and its name cannot be one: name its workspace (--workspace NAME; 1 to 63 of a-z, 0-9 and '-')", name)
	}
	if _, err := s.store.GetWorkspace(ctx, name); err == nil {
		return "", errdefs.AlreadyExists("workspace %s exists: to give key %s its objects, name it (--workspace %s); for a new workspace, another", name, name, name)
	} else if !errors.Is(err, errdefs.ErrNotFound) {
		return "", err
	}
	return name, nil
}

// List lists the keys of workspace ws ("": of every workspace).
func (s *Service) List(ctx context.Context, ws string) ([]*Key, error) {
	recs, err := s.store.ListAPIKeys(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*Key, 0, len(recs))
	for _, r := range recs {
		if ws == "" || r.Workspace == ws {
			out = append(out, view(r))
		}
	}
	return out, nil
}

// Delete removes a key of workspace ws ("": of any): it works no more.
// Another workspace's key is not found.
func (s *Service) Delete(ctx context.Context, ws, name string) error {
	if ws != "" {
		keys, err := s.List(ctx, ws)
		if err != nil {
			return err
		}
		own := workspace.Qualify(name, ws)
		i := slices.IndexFunc(keys, func(k *Key) bool { return k.Name == name || k.Name == own })
		if i < 0 {
			return errdefs.NotFound("API key %s not found", name)
		}
		name = keys[i].Name
	}
	return s.store.DeleteAPIKey(ctx, name)
}

// Lookup finds the key a caller gave; ErrNotFound when it is none.
func (s *Service) Lookup(ctx context.Context, key string) (*Key, error) {
	rec, err := s.store.APIKeyByHash(ctx, hashKey(key))
	if err != nil {
		return nil, err
	}
	return view(rec), nil
}

func view(k *store.APIKey) *Key {
	return &Key{Name: k.Name, ToolsMode: k.ToolsMode, NetworkMode: k.NetworkMode, Workspace: k.Workspace, CreatedAt: k.CreatedAt}
}

func hashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// InAdminWorkspace names the keys that act in the administrator's
// workspace: made before it was the administrator's alone, they still
// reach its objects until they are made again in a workspace of their own.
func (s *Service) InAdminWorkspace(ctx context.Context) ([]string, error) {
	keys, err := s.List(ctx, workspace.Default)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, k := range keys {
		names = append(names, k.Name)
	}
	return names, nil
}
