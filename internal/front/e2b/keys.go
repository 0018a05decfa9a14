package e2b

import (
	"context"
	"crypto/subtle"
	"sync"
	"time"

	"github.com/hutchdev/hutch/internal/trust/apikeys"
)

// A sandbox's tokens are bound to the key they were given to. The control
// plane gives the tokens of create, connect and getInfo to the caller's
// key, and derives them from that key's name and the time it was made
// (the daemon's own key: "" and none), so that a key made again under the
// same name gets other tokens. The front takes a token only if it is the
// one of a key that lives now and may reach the sandbox: the daemon's
// own, or a key of the sandbox's workspace. It knows which keys live from
// a list it reads again at most every keyringTTL, so that a deleted key's
// tokens, and the /files URLs signed with them, stop working within that
// time, on every node of a cluster alike (the list is the store's).

// Keys finds API keys (*apikeys.Service has them).
type Keys interface {
	// Lookup finds the key a caller gave; ErrNotFound when it is none.
	Lookup(ctx context.Context, key string) (*apikeys.Key, error)
	// List lists the keys of a workspace ("": of every workspace).
	List(ctx context.Context, workspace string) ([]*apikeys.Key, error)
}

var _ Keys = (*apikeys.Service)(nil)

// holder is a key that sandboxes' tokens are given to: its name and when
// it was made (Unix nanoseconds). The zero holder is the daemon's own
// key, which no name of another key is (apikeys refuses "").
type holder struct {
	name string
	made int64
}

func holderOfKey(k *apikeys.Key) holder { return holder{name: k.Name, made: k.CreatedAt.UnixNano()} }

// admin is the daemon's own key's holder, alone.
var admin = []holder{{}}

// resolveHolder is the holder of key, a caller's Hutch key: the daemon's
// own (daemonKey), or one keys finds; every key is the daemon's when keys
// is nil (tokens are then bound to no key).
func resolveHolder(ctx context.Context, keys Keys, daemonKey, key string) (holder, error) {
	if keys == nil || subtle.ConstantTimeCompare([]byte(key), []byte(daemonKey)) == 1 {
		return holder{}, nil
	}
	k, err := keys.Lookup(ctx, key)
	if err != nil {
		return holder{}, err
	}
	return holderOfKey(k), nil
}

// keyringTTL bounds how long the front takes a deleted key's tokens.
const keyringTTL = time.Second

// keyring knows, per workspace, the keys that live, read again from Keys
// when its list is keyringTTL old, and per sandbox the tokens of those
// keys, worked out once per list. Requests meanwhile read them in memory:
// the front's check costs no query and no HMAC. It is safe for
// concurrent use.
type keyring struct {
	keys   Keys
	tokens tokens
	ttl    time.Duration
	now    func() time.Time

	mu    sync.Mutex // held while the list is read again: one read at a time
	at    time.Time
	byWS  map[string][]holder    // each list starts with admin's
	bySbx map[string]*candidates // emptied with each new list
}

// candidates are the tokens a sandbox takes now: for each key that may
// reach it (holders), that key's envd and traffic tokens, at the same
// index. Shared: callers do not change them.
type candidates struct {
	holders       []holder
	envd, traffic []string
}

func newKeyring(keys Keys, t tokens) *keyring {
	return &keyring{keys: keys, tokens: t, ttl: keyringTTL, now: time.Now}
}

// holders lists the keys that may reach a sandbox of workspace ws: the
// daemon's, first, and ws's. The list is shared: callers do not change it.
func (k *keyring) holders(ctx context.Context, ws string) ([]holder, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.holdersLocked(ctx, ws)
}

func (k *keyring) holdersLocked(ctx context.Context, ws string) ([]holder, error) {
	if now := k.now(); k.byWS == nil || now.Sub(k.at) >= k.ttl || now.Before(k.at) {
		var all []*apikeys.Key
		if k.keys != nil {
			var err error
			if all, err = k.keys.List(ctx, ""); err != nil {
				return nil, err
			}
		}
		byWS := map[string][]holder{}
		for _, key := range all {
			if byWS[key.Workspace] == nil {
				byWS[key.Workspace] = append([]holder(nil), admin...)
			}
			byWS[key.Workspace] = append(byWS[key.Workspace], holderOfKey(key))
		}
		k.byWS, k.bySbx, k.at = byWS, map[string]*candidates{}, now
	}
	if hs, ok := k.byWS[ws]; ok {
		return hs, nil
	}
	return admin, nil
}

// candidates are the tokens sandbox id of workspace ws takes now.
func (k *keyring) candidates(ctx context.Context, id, ws string) (*candidates, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	hs, err := k.holdersLocked(ctx, ws)
	if err != nil {
		return nil, err
	}
	if c, ok := k.bySbx[id]; ok {
		return c, nil
	}
	c := &candidates{holders: hs, envd: make([]string, len(hs)), traffic: make([]string, len(hs))}
	for i, h := range hs {
		c.envd[i], c.traffic[i] = k.tokens.token("envd", id, h), k.tokens.token("traffic", id, h)
	}
	k.bySbx[id] = c
	return c, nil
}

// holderOf finds the holder whose token got is among tokens (c.envd or
// c.traffic), comparing in constant time; false when none's is.
func (c *candidates) holderOf(tokens []string, got string) (holder, bool) {
	if got == "" {
		return holder{}, false
	}
	for i, t := range tokens {
		if subtle.ConstantTimeCompare([]byte(got), []byte(t)) == 1 {
			return c.holders[i], true
		}
	}
	return holder{}, false
}
