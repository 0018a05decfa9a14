// Package imagetest makes OCI images in memory for tests: layers of files
// given by name and contents.
package imagetest

import (
	"archive/tar"
	"bytes"
	"io"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Entry is one entry of a layer: a regular file (Type 0), or a directory,
// symbolic or hard link by tar's type flag.
type Entry struct {
	Name string
	Body string
	Link string // of a link
	Type byte
	Mode int64 // 0: 0644
}

// Layer makes a layer of entries, in order.
func Layer(t testing.TB, entries ...Entry) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.Name, Typeflag: e.Type, Mode: e.Mode, Linkname: e.Link}
		if hdr.Typeflag == 0 {
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(e.Body))
		}
		if hdr.Mode == 0 {
			hdr.Mode = 0o644
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, e.Body); err != nil && hdr.Size > 0 {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Image makes an image of layers, the first at the bottom.
func Image(t testing.TB, layers ...v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	return img
}
