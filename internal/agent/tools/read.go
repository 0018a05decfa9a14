package tools

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"
)

// Bounds of one read.
const (
	maxReadLines    = 2000
	maxReadBytes    = 256 << 10
	maxLineBytes    = 4000     // a longer line is cut, and says so
	maxCountedBytes = 64 << 20 // past this, total_lines is not counted
	sniffBytes      = 8 << 10
)

type readArgs struct {
	Path      string `json:"path"`
	StartLine int    `json:"start_line"`
	EndLine   int    `json:"end_line"`
}

// ReadResult is what sandbox_read_file returns.
type ReadResult struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
	// Content is the lines read, each as its number, a tab and its text.
	Content   string `json:"content"`
	StartLine int    `json:"start_line"`
	EndLine   int    `json:"end_line"` // the last line in Content; 0 when none
	// TotalLines is absent when the file is too long to count.
	TotalLines *int `json:"total_lines,omitempty"`
	// Truncated: more lines follow, from NextStartLine.
	Truncated     bool `json:"truncated,omitempty"`
	NextStartLine int  `json:"next_start_line,omitempty"`
	// LineEndings is "crlf" or "mixed" (absent: "\n"); the \r are not in
	// Content.
	LineEndings    string `json:"line_endings,omitempty"`
	NoFinalNewline bool   `json:"no_final_newline,omitempty"`
	// NotUTF8: bytes that are not UTF-8 show as U+FFFD.
	NotUTF8 bool `json:"not_utf8,omitempty"`
	// Binary files are described in Note, not shown.
	Binary bool   `json:"binary,omitempty"`
	Note   string `json:"note,omitempty"`
}

func (f Files) readFile(a readArgs) (ReadResult, error) {
	p, err := f.abs(a.Path)
	if err != nil {
		return ReadResult{}, err
	}
	if a.StartLine < 0 || a.EndLine < 0 || a.EndLine > 0 && a.EndLine < a.StartLine {
		return ReadResult{}, invalid("start_line and end_line must be positive, end_line not before start_line")
	}
	start := max(a.StartLine, 1)
	file, err := f.fs.Open(p)
	if err != nil {
		return ReadResult{}, fileError(err)
	}
	defer file.Close()
	fi, err := file.Stat()
	if err != nil {
		return ReadResult{}, fileError(err)
	}
	if fi.IsDir() {
		return ReadResult{}, invalid("%s is a directory: list it with %s", p, ListDirectory)
	}
	res := ReadResult{Path: p, Size: fi.Size(), StartLine: start}
	r := bufio.NewReaderSize(file, 64<<10)
	head, _ := r.Peek(sniffBytes)
	if isBinary(head) {
		res.Binary = true
		res.Note = fmt.Sprintf("binary file of %d bytes (%s); not shown", fi.Size(), http.DetectContentType(head))
		return res, nil
	}
	var out strings.Builder
	var line, read, crlf, lf int
	for {
		text, ending, n, cut, err := nextLine(r)
		if err != nil && !errors.Is(err, io.EOF) {
			return ReadResult{}, fileError(err)
		}
		if n == 0 {
			break
		}
		line++
		read += n
		switch ending {
		case "\r\n":
			crlf++
		case "\n":
			lf++
		default:
			res.NoFinalNewline = true
		}
		if line >= start && (a.EndLine == 0 || line <= a.EndLine) && !res.Truncated {
			if line-start >= maxReadLines || out.Len() >= maxReadBytes {
				res.Truncated, res.NextStartLine = true, line
			} else {
				if !utf8.Valid(text) {
					res.NotUTF8 = true
					text = bytes.ToValidUTF8(text, []byte("\uFFFD"))
				}
				fmt.Fprintf(&out, "%6d\t%s", line, text)
				if cut {
					fmt.Fprintf(&out, " … (line cut at %d bytes)", maxLineBytes)
				}
				out.WriteByte('\n')
				res.EndLine = line
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if read > maxCountedBytes && (res.Truncated || a.EndLine > 0 && line >= a.EndLine) {
			line = -1 // too long to count
			break
		}
	}
	if line >= 0 {
		res.TotalLines = &line
	}
	switch {
	case crlf > 0 && lf > 0:
		res.LineEndings = "mixed"
	case crlf > 0:
		res.LineEndings = "crlf"
	}
	res.Content = out.String()
	if line == 0 {
		res.Note = "the file is empty"
	} else if res.EndLine == 0 && !res.Truncated {
		res.Note = fmt.Sprintf("start_line %d is past the end of the file", start)
	}
	return res, nil
}

// nextLine reads a line of r: its text without the line ending, cut to
// maxLineBytes (cut says so) and valid until the next read; its ending
// ("\n", "\r\n", or "" at the end of the file); and the bytes it took.
func nextLine(r *bufio.Reader) (text []byte, ending string, n int, cut bool, err error) {
	chunk, err := r.ReadSlice('\n')
	n, text = len(chunk), chunk
	if errors.Is(err, bufio.ErrBufferFull) { // longer than the buffer
		text = append([]byte(nil), chunk[:maxLineBytes]...)
		for errors.Is(err, bufio.ErrBufferFull) {
			chunk, err = r.ReadSlice('\n')
			n += len(chunk)
		}
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, "", n, false, err
	}
	switch {
	case bytes.HasSuffix(chunk, []byte("\r\n")):
		ending = "\r\n"
	case bytes.HasSuffix(chunk, []byte("\n")):
		ending = "\n"
	}
	text = bytes.TrimSuffix(text, []byte(ending))
	if len(text) > maxLineBytes || n-len(ending) > maxLineBytes {
		text, cut = text[:min(len(text), maxLineBytes)], true
	}
	return text, ending, n, cut, err
}

// isBinary says whether the start of a file looks like anything but text:
// a NUL byte, or over 30% of bytes that are neither UTF-8 nor printable.
func isBinary(head []byte) bool {
	if bytes.IndexByte(head, 0) >= 0 {
		return true
	}
	total, odd := len(head), 0
	for len(head) > 0 {
		r, n := utf8.DecodeRune(head)
		broken := r == utf8.RuneError && n == 1 && len(head) >= utf8.UTFMax // not a rune cut by the sniff's end
		if broken || r < 0x20 && !strings.ContainsRune("\n\r\t\f\v\x1b", r) {
			odd++
		}
		head = head[n:]
	}
	return odd*10 > total*3
}

// Bounds of one listing.
const (
	maxListDepth   = 5
	maxListEntries = 1000
)

type listArgs struct {
	Path  string `json:"path"`
	Depth int    `json:"depth"`
}

// Entry is one entry of a listing.
type Entry struct {
	Path     string    `json:"path"`
	Type     string    `json:"type"` // file, dir, symlink or other
	Size     int64     `json:"size"`
	Modified time.Time `json:"modified"`
}

// ListResult is what sandbox_list_directory returns.
type ListResult struct {
	Path      string  `json:"path"`
	Entries   []Entry `json:"entries"`
	Truncated bool    `json:"truncated,omitempty"`
}

func (f Files) listDirectory(a listArgs) (ListResult, error) {
	p, err := f.dirOrDefault(a.Path)
	if err != nil {
		return ListResult{}, err
	}
	depth := a.Depth
	if depth == 0 {
		depth = 1
	}
	if depth < 1 || depth > maxListDepth {
		return ListResult{}, invalid("depth must be between 1 and %d, got %d", maxListDepth, a.Depth)
	}
	fi, err := f.fs.Stat(p)
	if err != nil {
		return ListResult{}, fileError(err)
	}
	if !fi.IsDir() {
		return ListResult{}, invalid("%s is not a directory: read it with %s", p, ReadFile)
	}
	res := ListResult{Path: p, Entries: []Entry{}}
	errFull := errors.New("full")
	err = f.fs.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == p {
				return err
			}
			return nil // an unreadable subdirectory: listed, not entered
		}
		rel, _ := filepath.Rel(p, path)
		if rel == "." {
			return nil
		}
		if len(res.Entries) == maxListEntries {
			res.Truncated = true
			return errFull
		}
		e := Entry{Path: filepath.ToSlash(rel), Type: "other"}
		if info, err := d.Info(); err == nil {
			e.Size, e.Modified = info.Size(), info.ModTime().UTC()
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			e.Type = "symlink"
		case d.IsDir():
			e.Type, e.Size = "dir", 0
		case d.Type().IsRegular():
			e.Type = "file"
		}
		res.Entries = append(res.Entries, e)
		if d.IsDir() && strings.Count(e.Path, "/")+1 >= depth {
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil && !errors.Is(err, errFull) {
		return ListResult{}, fileError(err)
	}
	return res, nil
}
