package tools

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"syscall"
	"unicode/utf8"
)

// maxEditBytes bounds a file that find_replace or apply_patch reads whole.
const maxEditBytes = 16 << 20

type writeArgs struct {
	Path    string  `json:"path"`
	Content *string `json:"content"`
}

// WriteResult is what sandbox_write_file returns.
type WriteResult struct {
	Path    string `json:"path"`
	Bytes   int    `json:"bytes"`
	Created bool   `json:"created"`
}

func (f Files) writeFile(a writeArgs) (WriteResult, error) {
	p, err := f.abs(a.Path)
	if err != nil {
		return WriteResult{}, err
	}
	if a.Content == nil {
		return WriteResult{}, invalid("content is required (it may be empty)")
	}
	created, err := f.replace(p, []byte(*a.Content))
	if err != nil {
		return WriteResult{}, err
	}
	return WriteResult{Path: p, Bytes: len(*a.Content), Created: created}, nil
}

// replace writes data to file p atomically: to a temporary file beside it,
// renamed over it. A symlink is written through; an existing file keeps
// its mode and owner; a new one is 0644 and f's user's, as are the missing
// parent directories made for it.
func (f Files) replace(p string, data []byte) (created bool, err error) {
	if target, err := f.fs.EvalSymlinks(p); err == nil {
		p = target
	}
	mode, uid, gid := fs.FileMode(0o644), f.UID, f.GID
	switch fi, err := f.fs.Stat(p); {
	case err == nil && fi.IsDir():
		return false, invalid("%s is a directory", p)
	case err == nil:
		mode = fi.Mode().Perm()
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			uid, gid = int(st.Uid), int(st.Gid)
		}
	case errors.Is(err, fs.ErrNotExist):
		created = true
		if err := f.mkdirs(filepath.Dir(p)); err != nil {
			return false, err
		}
	default:
		return false, fileError(err)
	}
	tmp, tmpName, err := f.fs.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+".hutch-*")
	if err != nil {
		return false, fileError(err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = f.fs.Remove(tmpName)
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return false, fileError(err)
	}
	if err := errors.Join(tmp.Chmod(mode), tmp.Chown(uid, gid), tmp.Close()); err != nil {
		return false, fileError(err)
	}
	if err := f.fs.Rename(tmpName, p); err != nil {
		return false, fileError(err)
	}
	return created, nil
}

// readWhole reads a file to edit, refusing directories, binary files and
// files over maxEditBytes.
func (f Files) readWhole(p string) ([]byte, error) {
	fi, err := f.fs.Stat(p)
	if err != nil {
		return nil, fileError(err)
	}
	if fi.IsDir() {
		return nil, invalid("%s is a directory", p)
	}
	if fi.Size() > maxEditBytes {
		return nil, invalid("%s has %d bytes; files over %d MiB are not edited here", p, fi.Size(), maxEditBytes>>20)
	}
	data, err := f.fs.ReadFile(p)
	if err != nil {
		return nil, fileError(err)
	}
	if isBinary(data[:min(len(data), sniffBytes)]) {
		return nil, invalid("%s is a binary file", p)
	}
	return data, nil
}

type findReplaceArgs struct {
	Path       string  `json:"path"`
	Find       string  `json:"find"`
	Replace    *string `json:"replace"`
	ReplaceAll bool    `json:"replace_all"`
}

// FindReplaceResult is what sandbox_find_replace returns.
type FindReplaceResult struct {
	Path         string `json:"path"`
	Replacements int    `json:"replacements"`
}

func (f Files) findReplace(a findReplaceArgs) (FindReplaceResult, error) {
	p, err := f.abs(a.Path)
	if err != nil {
		return FindReplaceResult{}, err
	}
	if a.Find == "" {
		return FindReplaceResult{}, invalid("find must not be empty")
	}
	if a.Replace == nil {
		return FindReplaceResult{}, invalid("replace is required (it may be empty)")
	}
	data, err := f.readWhole(p)
	if err != nil {
		return FindReplaceResult{}, err
	}
	find := []byte(a.Find)
	n := bytes.Count(data, find)
	switch {
	case n == 0:
		hint := ""
		switch {
		case bytes.Contains(data, []byte("\r\n")) && !bytes.Contains(find, []byte("\r\n")) && bytes.Contains(find, []byte("\n")):
			hint = " (the file's lines end in \\r\\n)"
		case !utf8.Valid(data) && bytes.ContainsRune(find, utf8.RuneError):
			hint = fmt.Sprintf(" (the file has bytes that are not UTF-8, which read as U+FFFD: %s matches them)", ApplyPatch)
		}
		return FindReplaceResult{}, invalid("the text to find is not in %s%s; read the file and copy the text exactly", p, hint)
	case n > 1 && !a.ReplaceAll:
		return FindReplaceResult{}, invalid("the text to find is in %s %d times, starting on lines %v; give more surrounding text to make it unique, or set replace_all", p, n, startLines(data, find))
	}
	if _, err := f.replace(p, bytes.ReplaceAll(data, find, []byte(*a.Replace))); err != nil {
		return FindReplaceResult{}, err
	}
	return FindReplaceResult{Path: p, Replacements: n}, nil
}

// startLines lists the lines (from 1) on which each occurrence of find in
// data starts, the first ten.
func startLines(data, find []byte) []int {
	var lines []int
	for off := 0; len(lines) < 10; {
		i := bytes.Index(data[off:], find)
		if i < 0 {
			break
		}
		lines = append(lines, bytes.Count(data[:off+i], []byte("\n"))+1)
		off += i + len(find)
	}
	return lines
}

type deleteArgs struct {
	Path      string `json:"path"`
	Recursive bool   `json:"recursive"`
}

// DeleteResult is what sandbox_delete_file returns.
type DeleteResult struct {
	Path string `json:"path"`
	Type string `json:"type"` // what it was: file, dir, symlink or other
}

func (f Files) deleteFile(a deleteArgs) (DeleteResult, error) {
	p, err := f.abs(a.Path)
	if err != nil {
		return DeleteResult{}, err
	}
	if p == "/" || p == f.Dir {
		return DeleteResult{}, invalid("%s is not deleted: delete what is in it", p)
	}
	fi, err := f.fs.Lstat(p)
	if err != nil {
		return DeleteResult{}, fileError(err)
	}
	res := DeleteResult{Path: p, Type: "other"}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		res.Type = "symlink"
	case fi.IsDir():
		res.Type = "dir"
	case fi.Mode().IsRegular():
		res.Type = "file"
	}
	if fi.IsDir() && a.Recursive {
		err = f.fs.RemoveAll(p)
	} else {
		err = f.fs.Remove(p)
	}
	if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
		return DeleteResult{}, invalid("%s is a directory that is not empty: set recursive to delete it with everything in it", p)
	}
	if err != nil {
		return DeleteResult{}, fileError(err)
	}
	return res, nil
}
