package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
)

// SetNetwork changes sandbox id's network policy: its next connections and
// lookups are decided by p, without a restart.
func (c *Client) SetNetwork(ctx context.Context, id string, p NetworkPolicy) (*Sandbox, error) {
	return c.UpdateSandbox(ctx, id, UpdateSandboxRequest{Network: &p})
}

// NetworkEvents lists sandbox id's refused connections and lookups after
// the cursor after (0: all the daemon keeps, the newest 1000).
func (c *Client) NetworkEvents(ctx context.Context, id string, after uint64) (*NetworkEvents, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	var evs NetworkEvents
	q := url.Values{"after": {strconv.FormatUint(after, 10)}}
	if err := c.call(ctx, request{method: http.MethodGet, path: sandboxPath(id) + "/network/events", query: q}, &evs); err != nil {
		return nil, err
	}
	return &evs, nil
}

// NetworkLog lists sandbox id's connections and lookups after the cursor
// after (0: all the daemon keeps, the newest 2,000), each with the rule
// that decided it.
func (c *Client) NetworkLog(ctx context.Context, id string, after uint64) (*NetworkLog, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	var l NetworkLog
	q := url.Values{"after": {strconv.FormatUint(after, 10)}}
	if err := c.call(ctx, request{method: http.MethodGet, path: sandboxPath(id) + "/network/log", query: q}, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// NetworkProposal is the smallest allow-list that would have let sandbox
// id's connections through (those made in mode learn, if it was in it):
// a policy to SetNetwork on it or on another sandbox.
func (c *Client) NetworkProposal(ctx context.Context, id string) (*NetworkPolicy, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	var p NetworkPolicy
	if err := c.call(ctx, request{method: http.MethodGet, path: sandboxPath(id) + "/network/proposal"}, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// FollowNetworkEvents calls fn with each of sandbox id's refusals after the
// cursor after, and with each new one as it comes, until ctx ends (then it
// returns nil) or fn returns an error.
func (c *Client) FollowNetworkEvents(ctx context.Context, id string, after uint64, fn func(NetworkEvent) error) error {
	if err := checkID(id); err != nil {
		return err
	}
	q := url.Values{"after": {strconv.FormatUint(after, 10)}}
	return followEvents(ctx, c, request{method: http.MethodGet, path: sandboxPath(id) + "/network/events", query: q}, "network events", "refusal", fn)
}
