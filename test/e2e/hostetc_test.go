package e2e

import (
	"os"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/client"
)

// The template host's /etc has what the host's programs read there to
// work: Debian's matplotlib fails without /etc/matplotlibrc, and
// fontconfig complains without /etc/fonts.
func TestHostTemplateEtc(t *testing.T) {
	t.Parallel()
	for _, f := range []string{"/etc/matplotlibrc", "/etc/fonts/fonts.conf"} {
		if _, err := os.Stat(f); err != nil {
			t.Skipf("the host has no %s (./setup --deps installs python3-matplotlib): %v", f, err)
		}
	}
	d := startDaemon(t)
	sb := d.create(client.CreateSandboxRequest{Template: "host"})
	res := d.exec(sb.ID, `python3 -c 'import matplotlib.pyplot as p; p.plot([1, 2]); p.savefig("chart.png"); print("charted")'`)
	if res.ExitCode != 0 || res.Stdout != "charted\n" || strings.Contains(res.Stderr, "Fontconfig error") {
		t.Errorf("matplotlib in the template host: %+v", res)
	}
}
