package sandbox

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/hutchdev/hutch/internal/errdefs"
	"github.com/hutchdev/hutch/internal/store"
	"github.com/hutchdev/hutch/internal/template"
	"github.com/hutchdev/hutch/internal/tools"
)

// API keys besides the daemon's own: each names the least isolated sandbox
// mode its tool calls may use, so that one embedding app's key can be let
// run calls on the host and another's kept to the sandbox. Only a hash of
// each key is stored; the key is shown once, when made.

// CreateAPIKey makes a key named name whose tool calls may use toolsMode
// or a more isolated mode (default: tools.ModeAll). It returns the key.
func (m *Manager) CreateAPIKey(ctx context.Context, name, toolsMode string) (string, *APIKey, error) {
	if err := template.CheckName(name); err != nil {
		return "", nil, errdefs.InvalidArgument("key name: %v", err)
	}
	if toolsMode == "" {
		toolsMode = tools.ModeAll
	}
	if !tools.ValidMode(toolsMode) {
		return "", nil, errdefs.InvalidArgument("tools_mode must be all, selective or off, got %q", toolsMode)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", nil, err
	}
	key := "hutch_" + hex.EncodeToString(raw)
	rec := &store.APIKey{Name: name, Hash: hashKey(key), ToolsMode: toolsMode, CreatedAt: m.clock.Now().UTC()}
	if err := m.store.CreateAPIKey(ctx, rec); err != nil {
		return "", nil, err
	}
	m.log.Info("API key made", "name", name, "tools_mode", toolsMode)
	return key, apiKeyView(rec), nil
}

// APIKey is an API key as callers see it: not the key, nor its hash.
type APIKey struct {
	Name string
	// ToolsMode is the least isolated sandbox mode its tool calls may use.
	ToolsMode string
	CreatedAt time.Time
}

func apiKeyView(k *store.APIKey) *APIKey {
	return &APIKey{Name: k.Name, ToolsMode: k.ToolsMode, CreatedAt: k.CreatedAt}
}

// APIKeys lists the keys.
func (m *Manager) APIKeys(ctx context.Context) ([]*APIKey, error) {
	recs, err := m.store.ListAPIKeys(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*APIKey, 0, len(recs))
	for _, r := range recs {
		out = append(out, apiKeyView(r))
	}
	return out, nil
}

// DeleteAPIKey removes a key: it works no more.
func (m *Manager) DeleteAPIKey(ctx context.Context, name string) error {
	return m.store.DeleteAPIKey(ctx, name)
}

// LookupAPIKey finds the key a caller gave; ErrNotFound when it is none.
func (m *Manager) LookupAPIKey(ctx context.Context, key string) (*APIKey, error) {
	rec, err := m.store.APIKeyByHash(ctx, hashKey(key))
	if err != nil {
		return nil, err
	}
	return apiKeyView(rec), nil
}

func hashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}
