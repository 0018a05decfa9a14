package sandbox

import "testing"

func TestValidEnvName(t *testing.T) {
	for name, want := range map[string]bool{
		"PATH": true, "_x": true, "a1_B2": true, "x": true,
		"": false, "1A": false, "A-B": false, "A B": false, "A=B": false, "É": false,
	} {
		if got := validEnvName(name); got != want {
			t.Errorf("validEnvName(%q) = %v, want %v", name, got, want)
		}
	}
}
