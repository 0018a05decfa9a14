package network_test

import (
	"errors"
	"os"
	"reflect"
	"testing"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core"
	"github.com/hutchdev/hutch/internal/core/coretest"
	"github.com/hutchdev/hutch/internal/core/create"
	"github.com/hutchdev/hutch/internal/core/network"
	"github.com/hutchdev/hutch/internal/net/netpolicy"
	"github.com/hutchdev/hutch/internal/runtime/fake"
	"go.uber.org/goleak"
)

// A sandbox's policy: the daemon's default when the create names none, the
// create's when it does; a changed one is kept, in the store too; one that
// does not compile changes nothing. (The fake backend gives sandboxes no
// network: what the policy decides is the e2e tests'.)
func TestNetworkPolicies(t *testing.T) {
	t.Parallel()
	var nets *network.Plane
	d := coretest.Start(t, func(c *core.Config) {
		nets = network.New(network.Config{Store: c.Store, Default: netpolicy.Policy{Mode: netpolicy.Allowlist}})
		c.Hooks = append(c.Hooks, nets)
	})
	ctx := t.Context()
	if got := nets.Default(); got.Mode != netpolicy.Allowlist {
		t.Errorf("default %+v", got)
	}
	plain := d.Create(t, create.Options{})
	if plain.Network.Mode != netpolicy.Allowlist {
		t.Errorf("a sandbox created without a policy got %+v, want the default", plain.Network)
	}
	full := netpolicy.Policy{Mode: netpolicy.Full, Deny: []string{"*.example.com"}}
	sb := d.Create(t, create.Options{Network: &full})
	if !reflect.DeepEqual(sb.Network, full) {
		t.Errorf("created with %+v, got %+v", full, sb.Network)
	}
	if _, _, err := d.M.Create(ctx, create.Options{Network: &netpolicy.Policy{Mode: "open"}}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("a create with mode open: %v, want invalid argument", err)
	}

	narrow := netpolicy.Policy{Mode: netpolicy.Allowlist, Allow: []string{"pypi.org"}}
	if err := nets.Set(ctx, sb.ID, narrow); err != nil {
		t.Fatalf("Set: %v", err)
	}
	if got, err := d.M.Get(ctx, sb.ID); err != nil || !reflect.DeepEqual(got.Network, narrow) {
		t.Fatalf("after Set: %+v, %v", got, err)
	}
	if err := nets.Set(ctx, sb.ID, netpolicy.Policy{Mode: netpolicy.Allowlist, Allow: []string{"not a rule!"}}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("Set of a bad rule: %v, want invalid argument", err)
	}
	if err := nets.Set(ctx, "nosuchsandbox", narrow); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Set of a missing sandbox: %v, want not found", err)
	}
	log, err := nets.Events(ctx, sb.ID)
	if err != nil || log.Last() != 0 {
		t.Errorf("events of a sandbox with no network: %v, %v", log, err)
	}
	if c := nets.Counters(sb.ID); c != (network.Counters{}) {
		t.Errorf("counters %+v", c)
	}

	if rec, err := d.DB.GetSandbox(ctx, sb.ID); err != nil || !reflect.DeepEqual(rec.Network, narrow) {
		t.Errorf("in the store: %+v, %v", rec, err)
	}
	for _, id := range []string{plain.ID, sb.ID} {
		if err := d.M.Delete(ctx, id); err != nil {
			t.Error(err)
		}
	}
}

func TestMain(m *testing.M) {
	if code, ran := fake.Main(); ran {
		os.Exit(code)
	}
	goleak.VerifyTestMain(m)
}
