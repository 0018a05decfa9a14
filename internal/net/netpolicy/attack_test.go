package netpolicy

import (
	"errors"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// An allow rule as wide as the internet would turn mode allowlist into
// mode full, and so a key limited to allowlist into one with full
// (issue 36, finding 9): such rules are refused, saying what to write
// instead; rules that name one owner's hosts or block still compile, and
// deny rules may be as wide as wished.
func TestAttackAllowlistWildcard(t *testing.T) {
	for _, tc := range []struct {
		rule string
		want string // in the error
	}{
		{"*", "mode full"},
		{"*.*", "mode full"},
		{"*.com", "public suffix"},
		{"*.COM.", "public suffix"},
		{"*.com:443", "public suffix"},
		{"*.co.uk", "public suffix"},
		{"*.internal", "public suffix"},
		{"0.0.0.0/0", "/8 of IPv4"},
		{"0.0.0.0/1", "/8 of IPv4"},
		{"128.0.0.0/7", "/8 of IPv4"},
		{"::/0", "/32 of IPv6"},
		{"2000::/3", "/32 of IPv6"},
		{"2001:db8::/31", "/32 of IPv6"},
		{"::ffff:0.0.0.0/104", "IPv4-mapped"},
		{"64:ff9b::/96", "NAT64"},
		{"64:ff9b::/100", "NAT64"},
		{"2002::/16", "/32 of IPv6"},
	} {
		_, err := Compile(Policy{Mode: Allowlist, Allow: []string{tc.rule}})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("allow %q: %v, want an invalid argument saying %q", tc.rule, err, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), "203.0.113.0/24") && !strings.Contains(err.Error(), "mode full") {
			t.Errorf("allow %q: %v, want it to say what to write instead", tc.rule, err)
		}
	}
	for _, ok := range []string{"*.example.com", "*.example.co.uk", "*.githubusercontent.com", "*.corp.internal", "*.github.io", "*.s3.amazonaws.com", "17.0.0.0/8", "203.0.113.0/24", "2001:db8::/32", "64:ff9b::cb00:7100/120", "2002:cb00:7100::/40"} {
		if _, err := Compile(Policy{Mode: Allowlist, Allow: []string{ok}}); err != nil {
			t.Errorf("allow %q: %v, want it to compile", ok, err)
		}
	}
	if _, err := Compile(Policy{Mode: Full, Deny: []string{"0.0.0.0/0", "*.com", "::/0"}}); err != nil {
		t.Errorf("wide deny rules: %v, want them to compile", err)
	}
}
