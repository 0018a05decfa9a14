// Package archivetest reads the archives Hutch packs (tools.WriteArchive
// and the daemon's redacted re-packing), for tests.
package archivetest

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/hutchdev/hutch/internal/agent/tools"
)

// Entry is one entry of an archive: its mode, and a file's content or a
// symlink's target.
type Entry struct {
	Mode fs.FileMode
	Body string
}

// Read reads a tar.gz or zip archive's entries by name.
func Read(format string, data []byte) (map[string]Entry, error) {
	if format == tools.FormatZip {
		return readZip(data)
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("the tar.gz: %w", err)
	}
	out := map[string]Entry{}
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("the tar.gz: %w", err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			return nil, fmt.Errorf("the tar.gz's %s: %w", hdr.Name, err)
		}
		if hdr.Typeflag == tar.TypeSymlink {
			body = []byte(hdr.Linkname)
		}
		out[hdr.Name] = Entry{hdr.FileInfo().Mode(), string(body)}
	}
}

func readZip(data []byte) (map[string]Entry, error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("the zip: %w", err)
	}
	out := map[string]Entry{}
	for _, zf := range zr.File {
		rc, err := zf.Open()
		if err != nil {
			return nil, err
		}
		body, err := io.ReadAll(rc)
		_ = rc.Close()
		if err != nil {
			return nil, fmt.Errorf("the zip's %s: %w", zf.Name, err)
		}
		out[zf.Name] = Entry{zf.Mode(), string(body)}
	}
	return out, nil
}
