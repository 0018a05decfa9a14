package e2e

import (
	"errors"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/net/nettest"
)

// A suspended sandbox takes what changed while it slept when it wakes: a
// rotated secret, a network policy gone from none to an allow-list, a
// raised memory limit and new env; its on_resume command runs then, as its
// on_suspend command ran before it slept. Under both runtimes.
func TestResumeTakesTodaysSettings(t *testing.T) {
	t.Parallel()
	in := nettest.Start(t)
	d := startDaemonWith(t, "--network-netns", in.Netns, "--network-dns", in.DNS)
	forEachRuntime(t, func(t *testing.T, runtime string) {
		ctx := t.Context()
		name := "REBIND_TOKEN_" + strings.ToUpper(runtime)
		if _, err := d.client.SetSecret(ctx, client.SetSecretRequest{Name: name, Value: "first-value"}); err != nil {
			t.Fatal(err)
		}
		sb := d.create(client.CreateSandboxRequest{Runtime: runtime, MemoryMB: 256, Files: map[string]string{"ca.pem": string(in.CA)},
			Network:   &client.NetworkPolicy{Mode: client.NetworkNone},
			OnSuspend: "echo flushed > /tmp/on-suspend", OnResume: "echo reread >> on-resume.log"})
		// The value is redacted from output: the command compares it.
		if got := d.exec(sb.ID, `[ "$`+name+`" = first-value ] && echo first`).Stdout; got != "first\n" {
			t.Fatalf("the secret before: %q", got)
		}
		if _, err := d.client.SuspendSandbox(ctx, sb.ID); err != nil {
			t.Fatal(err)
		}
		// While it sleeps: the secret rotated, the policy opened to one
		// host, the memory limit raised, the env changed.
		if _, err := d.client.SetSecret(ctx, client.SetSecretRequest{Name: name, Value: "rotated-value"}); err != nil {
			t.Fatal(err)
		}
		if _, err := d.client.SetNetwork(ctx, sb.ID, client.NetworkPolicy{Mode: client.NetworkAllowlist, Allow: []string{"allowed.test"}}); err != nil {
			t.Fatal(err)
		}
		vol := "rebind-" + runtime
		if _, err := d.client.CreateVolume(ctx, vol); err != nil {
			t.Fatal(err)
		}
		vols := []client.VolumeMount{{Name: vol}}
		if _, err := d.client.UpdateSandbox(ctx, sb.ID, client.UpdateSandboxRequest{MemoryMB: 512, Env: map[string]string{"STAGE": "two"}, Volumes: &vols}); err != nil {
			t.Fatal(err)
		}
		if now, _ := d.client.GetSandbox(ctx, sb.ID); now.State != "suspended" || now.MemoryMB != 512 || now.Network.Mode != client.NetworkAllowlist {
			t.Errorf("the changes woke it or were lost: %+v", now)
		}

		res := d.exec(sb.ID, `[ "$`+name+`" = rotated-value ] && echo -n rotated; echo " $STAGE"; curl -sS --max-time 10 --cacert ca.pem https://allowed.test/ 2>&1; cat on-resume.log; cat /tmp/on-suspend 2>/dev/null`)
		want := "rotated two\nhello from allowed.test\nreread\n"
		if !strings.HasPrefix(res.Stdout, want) {
			t.Errorf("after the resume: %q, want %q first", res.Stdout, want)
		}
		if !strings.Contains(res.Stdout, "flushed") {
			t.Errorf("on_suspend did not run before the suspend: %q", res.Stdout)
		}
		if res := d.exec(sb.ID, "echo kept > /mnt/"+vol+"/x && cat /mnt/"+vol+"/x"); res.Stdout != "kept\n" {
			t.Errorf("the volume given while it slept: %+v", res)
		}
		// A running sandbox's volumes do not change under it.
		var ce *client.Error
		none := []client.VolumeMount{}
		if _, err := d.client.UpdateSandbox(ctx, sb.ID, client.UpdateSandboxRequest{Volumes: &none}); !errors.As(err, &ce) || ce.Code != "failed_precondition" {
			t.Errorf("volumes of a running sandbox changed: %v, want failed_precondition", err)
		}
		st, err := d.client.Stats(ctx, sb.ID)
		if err != nil || st.MemoryLimitBytes != 512<<20 {
			t.Errorf("the memory limit after the resume: %+v, %v; want 512 MiB", st, err)
		}
		if runtime == "runc" {
			// The limit holds: 400 MiB fit under 512 (not under 256).
			if got := d.exec(sb.ID, `python3 -c "b = bytearray(400 << 20); print('ok')"`); got.Stdout != "ok\n" {
				t.Errorf("400 MiB under the raised limit: %+v", got)
			}
		}
	})
}
