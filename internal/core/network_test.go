package core

import (
	"errors"
	"reflect"
	"testing"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/net/netpolicy"
)

// A sandbox's policy: the daemon's default when the create names none, the
// create's when it does; a changed one is kept, across a restart too; one
// that does not compile changes nothing. (The fake backend gives sandboxes
// no network: what the policy decides is the e2e tests'.)
func TestNetworkPolicies(t *testing.T) {
	t.Parallel()
	state := newDaemonState(t)
	d := state.start(t, func(c *Config) { c.Network.Default = netpolicy.Policy{Mode: netpolicy.Allowlist} })
	ctx := t.Context()
	nets := d.m.Networks()
	if got := nets.Default(); got.Mode != netpolicy.Allowlist {
		t.Errorf("default %+v", got)
	}
	plain := d.create(t, CreateOptions{})
	if plain.Network.Mode != netpolicy.Allowlist {
		t.Errorf("a sandbox created without a policy got %+v, want the default", plain.Network)
	}
	full := netpolicy.Policy{Mode: netpolicy.Full, Deny: []string{"*.example.com"}}
	sb := d.create(t, CreateOptions{Network: &full})
	if !reflect.DeepEqual(sb.Network, full) {
		t.Errorf("created with %+v, got %+v", full, sb.Network)
	}
	if _, err := d.m.create(ctx, CreateOptions{Network: &netpolicy.Policy{Mode: "open"}}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("a create with mode open: %v, want invalid argument", err)
	}

	narrow := netpolicy.Policy{Mode: netpolicy.Allowlist, Allow: []string{"pypi.org"}}
	if got, err := nets.Set(ctx, sb.ID, narrow); err != nil || !reflect.DeepEqual(got.Network, narrow) {
		t.Fatalf("Set: %+v, %v", got, err)
	}
	if _, err := nets.Set(ctx, sb.ID, netpolicy.Policy{Mode: netpolicy.Allowlist, Allow: []string{"not a rule!"}}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("Set of a bad rule: %v, want invalid argument", err)
	}
	if _, err := nets.Set(ctx, "nosuchsandbox", narrow); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Set of a missing sandbox: %v, want not found", err)
	}
	log, err := nets.Events(ctx, sb.ID)
	if err != nil || log.Last() != 0 {
		t.Errorf("events of a sandbox with no network: %v, %v", log, err)
	}
	if c := nets.Counters(sb.ID); c != (NetworkCounters{}) {
		t.Errorf("counters %+v", c)
	}

	d.stop(t)
	again := state.start(t)
	if got, err := again.m.Get(ctx, sb.ID); err != nil || !reflect.DeepEqual(got.Network, narrow) {
		t.Errorf("after a restart: %+v, %v", got, err)
	}
	for _, id := range []string{plain.ID, sb.ID} {
		if err := again.m.Delete(ctx, id); err != nil {
			t.Error(err)
		}
	}
}
