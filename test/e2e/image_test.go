package e2e

import (
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/storage/rootfs/imagetest"
)

// helloSource is the program of the test image: static, so that the image
// needs nothing else.
const helloSource = `package main

import (
	"fmt"
	"os"
)

func main() {
	b, err := os.ReadFile("/etc/greeting")
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	fmt.Printf("%s as uid %d\n", b, os.Getuid())
}
`

// helloImage is an image made here: a static program and the file it
// reads.
func helloImage(t *testing.T) v1.Image {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(helloSource), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "hello")
	build := exec.Command("go", "build", "-o", bin, "main.go")
	build.Dir = dir
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GO111MODULE=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the image's program: %v\n%s", err, out)
	}
	prog, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	return imagetest.Image(t, imagetest.Layer(t,
		imagetest.Entry{Name: "bin/hello", Body: string(prog), Mode: 0o755},
		imagetest.Entry{Name: "etc/greeting", Body: "hello from the image"},
	))
}

// TestTemplateFromImage pushes an image to a registry on loopback, pulls
// it with the CLI, imports the same image saved as a docker-archive, and
// runs its program under each runtime; then the failures.
func TestTemplateFromImage(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	ref := strings.TrimPrefix(srv.URL, "http://") + "/e2e/hello:v1"
	img := helloImage(t)
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "hello.tar")
	if err := tarball.WriteToFile(archive, r.(name.Tag), img); err != nil {
		t.Fatal(err)
	}

	if out, stderr, code := d.cli("", "template", "pull", "pulled", ref); code != 0 || !strings.HasPrefix(out, "pulled ") {
		t.Fatalf("template pull: %d %q %q", code, out, stderr)
	}
	if out, stderr, code := d.cli("", "template", "import", "imported", archive); code != 0 || !strings.HasPrefix(out, "imported ") {
		t.Fatalf("template import: %d %q %q", code, out, stderr)
	}
	got, err := d.client.GetTemplate(t.Context(), "pulled")
	if err != nil || got.Source != "image" || got.Image != ref || !strings.HasPrefix(got.Digest, "sha256:") {
		t.Errorf("the pulled template: %+v, %v", got, err)
	}
	forEachRuntime(t, func(t *testing.T, runtime string) {
		for _, tmpl := range []string{"pulled", "imported"} {
			out, stderr, code := d.cli("", "run", "--template", tmpl, "--runtime", runtime, "--", "/bin/hello")
			if code != 0 || out != "hello from the image as uid 1000\n" {
				t.Errorf("hutch run --template %s: %d %q %q", tmpl, code, out, stderr)
			}
		}
	})

	// A tag the registry does not have, and a file that is no image: clear
	// errors, and no template.
	if _, stderr, code := d.cli("", "template", "pull", "bad", strings.TrimSuffix(ref, ":v1")+":nope"); code != 1 || !strings.Contains(stderr, "nope") {
		t.Errorf("pull of a missing tag: %d %q", code, stderr)
	}
	junk := filepath.Join(t.TempDir(), "junk.tar")
	if err := os.WriteFile(junk, []byte("no image here"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := d.cli("", "template", "import", "bad", junk); code != 1 || !strings.Contains(stderr, "not a tar") {
		t.Errorf("import of a file that is no image: %d %q", code, stderr)
	}
	if _, err := d.client.BuildTemplate(t.Context(), client.BuildTemplateRequest{Name: "bad", Image: ref, Packages: []string{"jq"}}, nil); !client.IsInvalidArgument(err) {
		t.Errorf("an image with packages: %v, want an invalid argument", err)
	}
	assertNoTemplateBuilds(t, d)
}
