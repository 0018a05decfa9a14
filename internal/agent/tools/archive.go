package tools

import (
	"archive/tar"
	"archive/zip"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Archive formats of a directory download. FormatTar is the daemon's
// alone: it asks for an uncompressed archive when it must redact what is
// inside before compressing it itself; a user chooses tar.gz or zip.
const (
	FormatTarGz = "tar.gz"
	FormatZip   = "zip"
	FormatTar   = "tar"
)

// WriteArchive packs directory dir into w as format, for a download. No
// entry can land outside the directory it is unpacked in: names are clean
// and relative, under one top directory named after dir, and a symlink is
// kept only when its target stays inside the tree; other symlinks, devices,
// sockets and pipes are left out.
func WriteArchive(w io.Writer, dir, format string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fileError(err)
	}
	if !fi.IsDir() {
		return invalid("%s is not a directory", dir)
	}
	top := filepath.Base(dir)
	if top == "/" || top == "." {
		top = "root"
	}
	var add func(name string, fi fs.FileInfo, link string, body io.Reader) error
	var finish func() error
	switch format {
	case FormatTarGz, FormatTar, "":
		closeGzip := func() error { return nil }
		if format != FormatTar {
			zw := gzip.NewWriter(w)
			w, closeGzip = zw, zw.Close
		}
		tw := tar.NewWriter(w)
		add = func(name string, fi fs.FileInfo, link string, body io.Reader) error {
			hdr, err := tar.FileInfoHeader(fi, link)
			if err != nil {
				return err
			}
			hdr.Name, hdr.Uname, hdr.Gname = name, "", ""
			if fi.IsDir() {
				hdr.Name += "/"
			}
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			return copyBody(tw, body)
		}
		finish = func() error { return errors.Join(tw.Close(), closeGzip()) }
	case FormatZip:
		zw := zip.NewWriter(w)
		add = func(name string, fi fs.FileInfo, link string, body io.Reader) error {
			hdr, err := zip.FileInfoHeader(fi)
			if err != nil {
				return err
			}
			hdr.Name, hdr.Method = name, zip.Deflate
			if fi.IsDir() {
				hdr.Name += "/"
			}
			fw, err := zw.CreateHeader(hdr)
			if err != nil {
				return err
			}
			if link != "" {
				_, err = io.WriteString(fw, link) // zip keeps a symlink's target as its content
				return err
			}
			return copyBody(fw, body)
		}
		finish = zw.Close
	default:
		return invalid("format must be %s, %s or %s, got %q", FormatTarGz, FormatZip, FormatTar, format)
	}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable: left out
		}
		rel, _ := filepath.Rel(dir, p)
		name := path.Join(top, filepath.ToSlash(rel))
		info, err := d.Info()
		if err != nil {
			return nil
		}
		switch {
		case d.IsDir():
			return add(name, info, "", nil)
		case info.Mode().IsRegular():
			// #nosec G304 -- a file of the directory being packed, in the sandbox
			f, err := os.Open(p)
			if err != nil {
				return nil // unreadable: left out
			}
			defer f.Close()
			return add(name, info, "", f)
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil || !linkStaysInside(rel, target) {
				return nil
			}
			return add(name, info, target, nil)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("pack %s: %w", dir, err)
	}
	return finish()
}

// linkStaysInside says whether a symlink at rel (in the tree) pointing to
// target resolves inside the tree.
func linkStaysInside(rel, target string) bool {
	if path.IsAbs(target) {
		return false
	}
	resolved := path.Join(path.Dir(filepath.ToSlash(rel)), target)
	return resolved != ".." && !strings.HasPrefix(resolved, "../")
}

func copyBody(w io.Writer, body io.Reader) error {
	if body == nil {
		return nil
	}
	_, err := io.Copy(w, body)
	return err
}
