package e2e

import (
	"slices"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/client"
)

// A warm pool's sandbox takes a create that asks for env, secrets and
// volumes (mounted into it as it runs, under runc): the pool's own
// sandbox is the one answered, its commands see the env and the secret,
// it reads and writes the volume as its user, and after a suspend and a
// resume the volume is still there. A read-only volume cannot be written.
func TestPoolClaimWithVolumes(t *testing.T) {
	t.Parallel()
	d := startDaemonWith(t, "--pool", "host@runc=1")
	ctx := t.Context()
	for _, name := range []string{"shared", "refs"} {
		if _, err := d.client.CreateVolume(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	// What an earlier sandbox left in the volumes.
	writer := d.create(client.CreateSandboxRequest{Template: "host", Runtime: "runc", Volumes: []client.VolumeMount{{Name: "shared"}, {Name: "refs"}}})
	if res := d.exec(writer.ID, "echo from-before > /mnt/shared/note && echo ref > /mnt/refs/ref"); res.ExitCode != 0 {
		t.Fatalf("write the volumes: %+v", res)
	}
	if err := d.client.DeleteSandbox(ctx, writer.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := d.client.SetSecret(ctx, client.SetSecretRequest{Name: "POOL_TOKEN", Value: "pool-secret"}); err != nil {
		t.Fatal(err)
	}
	waitPoolReady(t, d, 1)
	// The writer's container may still be being torn down.
	pooled := slices.DeleteFunc(runcContainers(t, d), func(c string) bool { return c == "hutch-"+writer.ID })
	sb := d.create(client.CreateSandboxRequest{Template: "host", Runtime: "runc", Env: map[string]string{"STAGE": "claimed"},
		Volumes: []client.VolumeMount{{Name: "shared", Path: "/home/user/data"}, {Name: "refs", Access: "ro"}}})
	if len(pooled) != 1 || pooled[0] != "hutch-"+sb.ID {
		t.Fatalf("the sandbox %s is not the pool's %v", sb.ID, pooled)
	}
	res := d.exec(sb.ID, `echo $STAGE; [ "$POOL_TOKEN" = pool-secret ] && echo secret-seen; cat /home/user/data/note /mnt/refs/ref; echo mine > /home/user/data/mine && stat -c %U /home/user/data/mine; echo x > /mnt/refs/x 2>/dev/null || echo ro-refused`)
	want := "claimed\nsecret-seen\nfrom-before\nref\nuser\nro-refused\n"
	if res.Stdout != want {
		t.Errorf("in the claimed sandbox: %q (stderr %q), want %q", res.Stdout, res.Stderr, want)
	}
	got, err := d.client.GetSandbox(ctx, sb.ID)
	if err != nil || len(got.Volumes) != 2 {
		t.Errorf("the sandbox's volumes: %+v, %v", got, err)
	}
	if _, err := d.client.SuspendSandbox(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if res := d.exec(sb.ID, "cat /home/user/data/mine /mnt/refs/ref"); res.Stdout != "mine\nref\n" {
		t.Errorf("after a suspend and a resume: %+v", res)
	}
	if !strings.Contains(d.exec(sb.ID, "cat /proc/self/mountinfo").Stdout, " /home/user/data ") {
		t.Error("the volume is not mounted at /home/user/data after the resume")
	}
}
