package main

import (
	"archive/tar"
	"errors"
	"io"
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
)

// makeDeb builds a Debian package of the given files with dpkg-deb.
func makeDeb(t *testing.T, pkg, arch string, files map[string]string) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), pkg)
	control := "Package: " + pkg + "\nVersion: 1.0\nArchitecture: " + arch + "\nMaintainer: test <test@example.com>\nDescription: test\n"
	files["DEBIAN/control"] = control
	for p, body := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if strings.HasPrefix(body, "#!") {
			mode = 0o755
		}
		if err := os.WriteFile(full, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
	deb := root + ".deb"
	if out, err := exec.Command("dpkg-deb", "--root-owner-group", "--build", root, deb).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb --build: %v: %s", err, out)
	}
	return deb
}

// layerFiles reads every entry of an image's layers, by name.
func layerFiles(t *testing.T, img v1.Image) map[string]*tar.Header {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]*tar.Header{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			hdr, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			files[strings.TrimSuffix(hdr.Name, "/")] = hdr
		}
		rc.Close()
	}
	return files
}

func TestBuild(t *testing.T) {
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		t.Skip("dpkg-deb (Debian's dpkg) is needed to make and read packages")
	}
	dir := t.TempDir()
	binary := func(n string) string {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, []byte("binary "+n), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// A stand-in busybox: the builder runs it to list its applets.
	shell := makeDeb(t, "fakebox", "amd64", map[string]string{
		"bin/busybox":                     "#!/bin/sh\nprintf 'bin/sh\\nusr/sbin/httpd\\nbin/cat\\nlinuxrc\\n'\n",
		"usr/share/doc/fakebox/README":    "left out",
		"usr/share/man/man1/fakebox.1":    "left out",
		"usr/share/ca-certificates/a.crt": "CERT A\n",
	})
	tools := makeDeb(t, "tools", "all", map[string]string{"bin/cat": "#!/bin/sh\nreal cat\n"})
	o := options{hutch: binary("hutch"), runsc: binary("runsc"), version: "v9", debs: []string{shell, tools}}
	img, err := build(t.Context(), o, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}

	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.Config.Entrypoint, " "); got != "/usr/local/bin/hutch" {
		t.Errorf("entrypoint %q", got)
	}
	if cfg.Architecture != "amd64" || cfg.OS != "linux" {
		t.Errorf("platform %s/%s", cfg.OS, cfg.Architecture)
	}
	if cfg.Config.Labels["org.opencontainers.image.version"] != "v9" {
		t.Errorf("labels %v", cfg.Config.Labels)
	}

	files := layerFiles(t, img)
	for _, tc := range []struct {
		name     string
		typ      byte
		linkname string
	}{
		{"usr/local/bin/hutch", tar.TypeReg, ""},
		{"usr/local/bin/runsc", tar.TypeReg, ""},
		{"bin/busybox", tar.TypeReg, ""},
		{"bin/sh", tar.TypeSymlink, "/bin/busybox"},
		{"usr/sbin/httpd", tar.TypeSymlink, "/bin/busybox"},
		{"bin/cat", tar.TypeReg, ""}, // the package's, not busybox's
		{"etc/ssl/certs/ca-certificates.crt", tar.TypeReg, ""},
		{"tmp", tar.TypeDir, ""},
		{"usr/sbin", tar.TypeDir, ""}, // made for httpd's link
		{idFile, tar.TypeReg, ""},
	} {
		hdr := files[tc.name]
		if hdr == nil {
			t.Errorf("%s: missing", tc.name)
			continue
		}
		if hdr.Typeflag != tc.typ || hdr.Linkname != tc.linkname {
			t.Errorf("%s: type %c link %q, want %c %q", tc.name, hdr.Typeflag, hdr.Linkname, tc.typ, tc.linkname)
		}
	}
	for _, gone := range []string{"usr/share/doc/fakebox/README", "usr/share/man/man1/fakebox.1", "linuxrc", "DEBIAN/control"} {
		if files[gone] != nil {
			t.Errorf("%s is in the image", gone)
		}
	}
	if hdr := files["tmp"]; hdr != nil && hdr.Mode&0o1777 != 0o1777 {
		t.Errorf("tmp mode %o", hdr.Mode)
	}

	t.Run("archive", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "image.tar")
		if err := writeArchive(p, "hutch:test", img); err != nil {
			t.Fatal(err)
		}
		tag, _ := name.NewTag("hutch:test")
		back, err := tarball.ImageFromPath(p, &tag)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := img.Digest()
		if got, _ := back.Digest(); got != want {
			t.Errorf("archive holds %s, built %s", got, want)
		}
	})

	t.Run("push", func(t *testing.T) {
		srv := httptest.NewServer(registry.New())
		defer srv.Close()
		ref := strings.TrimPrefix(srv.URL, "http://") + "/hutch:test"
		if err := pushImage(t.Context(), ref, img); err != nil {
			t.Fatal(err)
		}
		r, _ := name.ParseReference(ref)
		back, err := remote.Image(r, remote.WithContext(t.Context()))
		if err != nil {
			t.Fatal(err)
		}
		want, _ := img.Digest()
		if got, _ := back.Digest(); got != want {
			t.Errorf("registry holds %s, pushed %s", got, want)
		}
	})
}

func TestRelative(t *testing.T) {
	for in, want := range map[string]string{
		"./":                "",
		"./usr/bin/x":       "usr/bin/x",
		"usr/bin/":          "usr/bin",
		"./../../etc/x":     "etc/x",
		"/lib64/ld.so":      "lib64/ld.so",
		"./usr/./lib//a.so": "usr/lib/a.so",
	} {
		if got := relative(in); got != want {
			t.Errorf("relative(%q) = %q, want %q", in, got, want)
		}
	}
}
