package errdefs

import (
	"errors"
	"fmt"
	"testing"
)

func TestPrefix(t *testing.T) {
	inner := fmt.Errorf("wrapped away: %w", InvalidArgument("the command failed (exit code 3)"))
	err := Prefix(inner, "Hutchfile line %d", 3)
	if !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Prefix lost the kind: %v", err)
	}
	if msg, ok := UserMessage(err); !ok || msg != "Hutchfile line 3: the command failed (exit code 3)" {
		t.Errorf("UserMessage = %q, %v", msg, ok)
	}
	plain := errors.New("disk on fire")
	err = Prefix(plain, "step %s", "x")
	if !errors.Is(err, plain) || Kind(err) != nil || err.Error() != "step x: disk on fire" {
		t.Errorf("Prefix of a plain error = %v", err)
	}
}
