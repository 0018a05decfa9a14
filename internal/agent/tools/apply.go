package tools

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"unicode/utf8"
)

type patchArgs struct {
	Patch string `json:"patch"`
}

// PatchResult is what sandbox_apply_patch returns.
type PatchResult struct {
	Files []PatchedFile `json:"files"`
}

// PatchedFile is one file a patch changed.
type PatchedFile struct {
	Path      string `json:"path"`
	Action    string `json:"action"` // added, updated, moved or deleted
	MovedFrom string `json:"moved_from,omitempty"`
}

// step is one file's change, planned whole before anything is written.
type step struct {
	PatchedFile
	from   string // the file it replaces or deletes ("" for an added file)
	data   []byte // the new content (nil for a deletion)
	mode   fs.FileMode
	uid    int
	gid    int
	delete bool
}

func (f Files) applyPatch(a patchArgs) (PatchResult, error) {
	if strings.TrimSpace(a.Patch) == "" {
		return PatchResult{}, invalid("patch is empty")
	}
	changes, err := parsePatch(a.Patch)
	if err != nil {
		return PatchResult{}, err
	}
	plan, err := f.plan(changes)
	if err != nil {
		return PatchResult{}, err
	}
	if err := f.commit(plan); err != nil {
		return PatchResult{}, err
	}
	res := PatchResult{Files: []PatchedFile{}}
	for _, s := range plan {
		res.Files = append(res.Files, s.PatchedFile)
	}
	return res, nil
}

// plan works out every file's new content without writing anything: a
// hunk that does not apply fails the patch here.
func (f Files) plan(changes []change) ([]step, error) {
	var plan []step
	touched := map[string]bool{}
	touch := func(p string) error {
		if touched[p] {
			return invalid("the patch changes %s twice: give each file once", p)
		}
		touched[p] = true
		return nil
	}
	for _, c := range changes {
		p, err := f.abs(c.path)
		if err != nil {
			return nil, err
		}
		s := step{PatchedFile: PatchedFile{Path: p}, mode: 0o644, uid: f.UID, gid: f.GID}
		switch c.op {
		case opAdd:
			if _, err := f.fs.Lstat(p); err == nil {
				return nil, invalid("%s exists already: change it with an update, not an add", p)
			}
			s.Action, s.data = "added", []byte(joinLines(c.add, !c.addNoEOL, false))
		case opDelete:
			fi, err := f.fs.Lstat(p)
			if err != nil {
				return nil, fileError(err)
			}
			if fi.IsDir() {
				return nil, invalid("%s is a directory: a patch deletes files", p)
			}
			s.Action, s.from, s.delete = "deleted", p, true
		case opUpdate:
			if target, err := f.fs.EvalSymlinks(p); err == nil {
				p = target // a symlink is changed through
			}
			data, err := f.readWhole(p)
			if err != nil {
				return nil, err
			}
			next, err := applyHunks(p, string(data), c.hunks)
			if err != nil {
				return nil, err
			}
			fi, err := f.fs.Stat(p)
			if err != nil {
				return nil, fileError(err)
			}
			s.mode = fi.Mode().Perm()
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				s.uid, s.gid = int(st.Uid), int(st.Gid)
			}
			s.Action, s.Path, s.from, s.data = "updated", p, p, []byte(next)
			if c.moveTo != "" {
				dest, err := f.abs(c.moveTo)
				if err != nil {
					return nil, err
				}
				if _, err := f.fs.Lstat(dest); err == nil && dest != p {
					return nil, invalid("cannot move %s to %s: it exists already", p, dest)
				}
				if err := touch(dest); err != nil {
					return nil, err
				}
				s.Action, s.Path, s.MovedFrom = "moved", dest, p
			}
		}
		if err := touch(p); err != nil {
			return nil, err
		}
		plan = append(plan, s)
	}
	return plan, nil
}

// commit carries out a plan all or nothing. Every new content is written
// to a temporary file beside its path first, so that a full disk fails
// before any file changes; then each replaced or deleted file is moved
// aside and its new content moved in. If a move fails, what was done is
// undone.
func (f Files) commit(plan []step) (err error) {
	var undo []func() error
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				err = errors.Join(err, undo[i]())
			}
		}
	}()
	temps := make([]string, len(plan))
	for i, s := range plan {
		if s.delete {
			continue
		}
		made, err := f.mkdirsFrom(filepath.Dir(s.Path))
		if err != nil {
			return err
		}
		if made != "" {
			undo = append(undo, func() error { return f.fs.RemoveAll(made) })
		}
		if temps[i], err = f.writeTemp(s); err != nil {
			return err
		}
		undo = append(undo, func() error { return ignoreMissing(f.fs.Remove(temps[i])) })
	}
	var asides []string
	for i, s := range plan {
		if s.from != "" {
			aside, err := f.moveAside(s.from)
			if err != nil {
				return err
			}
			asides = append(asides, aside)
			undo = append(undo, func() error { return f.fs.Rename(aside, s.from) })
		}
		if s.delete {
			continue
		}
		if err := f.fs.Rename(temps[i], s.Path); err != nil {
			return fileError(err)
		}
		undo = append(undo, func() error { return ignoreMissing(f.fs.Remove(s.Path)) })
	}
	for _, aside := range asides {
		_ = f.fs.Remove(aside) // the patch is in; a leftover is only clutter
	}
	return nil
}

// writeTemp writes a step's content to a temporary file beside its path,
// with its mode and owner.
func (f Files) writeTemp(s step) (string, error) {
	tmp, name, err := f.fs.CreateTemp(filepath.Dir(s.Path), "."+filepath.Base(s.Path)+".hutch-*")
	if err != nil {
		return "", fileError(err)
	}
	_, err = tmp.Write(s.data)
	if err = errors.Join(err, tmp.Chmod(s.mode), tmp.Chown(s.uid, s.gid), tmp.Close()); err != nil {
		_ = f.fs.Remove(name)
		return "", fileError(err)
	}
	return name, nil
}

// moveAside renames p to a new name beside it, and returns that name.
func (f Files) moveAside(p string) (string, error) {
	tmp, name, err := f.fs.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+".hutch-old-*")
	if err != nil {
		return "", fileError(err)
	}
	_ = tmp.Close()
	if err := f.fs.Rename(p, name); err != nil {
		_ = f.fs.Remove(name)
		return "", fileError(err)
	}
	return name, nil
}

func ignoreMissing(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// mkdirsFrom makes dir and its missing parents, as mkdirs does, and
// returns the topmost one it made ("" when dir was there).
func (f Files) mkdirsFrom(dir string) (string, error) {
	top := dir
	for {
		if _, err := f.fs.Lstat(top); err == nil {
			break
		}
		parent := filepath.Dir(top)
		if _, err := f.fs.Lstat(parent); err == nil || parent == top {
			break
		}
		top = parent
	}
	if _, err := f.fs.Lstat(top); err == nil {
		top = "" // nothing to make
	}
	return top, f.mkdirs(dir)
}

// applyHunks applies hunks, in order, to the text of file p.
func applyHunks(p, text string, hunks []hunk) (string, error) {
	crlf := strings.Count(text, "\r\n") > strings.Count(text, "\n")/2
	if crlf {
		text = strings.ReplaceAll(text, "\r\n", "\n")
	}
	eol := text == "" || strings.HasSuffix(text, "\n")
	var lines []string
	if text != "" {
		lines = strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	}
	cursor, delta := 0, 0
	for i, h := range hunks {
		at, err := locate(asUTF8(lines), h, cursor, delta)
		if err != nil {
			return "", invalid("%s: hunk %d of %d (%s) does not apply: %v; no file was changed", p, i+1, len(hunks), h.header, err)
		}
		atEnd := at+len(h.old) == len(lines)
		lines = append(lines[:at:at], append(replacement(h, lines[at:at+len(h.old)]), lines[at+len(h.old):]...)...)
		if atEnd {
			switch {
			case h.newNoEOL:
				eol = false
			case h.oldNoEOL:
				eol = true
			}
		}
		cursor, delta = at+len(h.new), delta+len(h.new)-len(h.old)
	}
	return joinLines(lines, eol, crlf), nil
}

// replacement is what hunk h puts in place of the file's lines it matched:
// its added lines, and its context lines as the file has them (byte for
// byte, where the hunk may differ in whitespace or show U+FFFD).
func replacement(h hunk, matched []string) []string {
	var out []string
	oi, ni := 0, 0
	for _, k := range h.kinds {
		switch k {
		case ' ':
			out = append(out, matched[oi])
			oi, ni = oi+1, ni+1
		case '-':
			oi++
		case '+':
			out = append(out, h.new[ni])
			ni++
		}
	}
	return out
}

// asUTF8 is lines with bytes that are not UTF-8 shown as U+FFFD, as
// sandbox_read_file shows them and a patch copies them.
func asUTF8(lines []string) []string {
	var out []string
	for i, l := range lines {
		if !utf8.ValidString(l) {
			if out == nil {
				out = slices.Clone(lines)
			}
			out[i] = strings.ToValidUTF8(l, "\uFFFD")
		}
	}
	if out == nil {
		return lines
	}
	return out
}

// joinLines makes text of lines, with a final line ending when eol.
func joinLines(lines []string, eol, crlf bool) string {
	sep := "\n"
	if crlf {
		sep = "\r\n"
	}
	text := strings.Join(lines, sep)
	if eol && len(lines) > 0 {
		text += sep
	}
	return text
}

// locate finds where hunk h's old lines are in lines, at or after cursor:
// where a unified diff says (shifted by delta, what earlier hunks added)
// or the nearest place to it; exactly, else ignoring trailing whitespace,
// else ignoring all surrounding whitespace.
func locate(lines []string, h hunk, cursor, delta int) (int, error) {
	if h.anchor != "" {
		i := indexFrom(lines, cursor, func(l string) bool { return strings.TrimSpace(l) == h.anchor })
		if i < 0 {
			return 0, fmt.Errorf("its @@ line %q is not in the file after line %d", h.anchor, cursor)
		}
		cursor = i + 1
	}
	want := cursor
	if h.oldStart > 0 {
		want = h.oldStart - 1 + delta
		if len(h.old) == 0 { // an insertion after line oldStart
			want = h.oldStart + delta
		}
		// Never behind what earlier hunks changed, also when the hunks
		// come out of order.
		want = max(want, cursor)
	}
	if len(h.old) == 0 {
		if h.oldStart == 0 && h.anchor == "" {
			return len(lines), nil // added at the end
		}
		return min(want, len(lines)), nil
	}
	for _, same := range []func(a, b string) bool{
		func(a, b string) bool { return a == b },
		func(a, b string) bool { return strings.TrimRight(a, " \t") == strings.TrimRight(b, " \t") },
		func(a, b string) bool { return strings.TrimSpace(a) == strings.TrimSpace(b) },
	} {
		best := -1
		for at := cursor; at+len(h.old) <= len(lines); at++ {
			if h.atEOF && at+len(h.old) != len(lines) {
				continue
			}
			if matchAt(lines, at, h.old, same) && (best < 0 || distance(at, want) < distance(best, want)) {
				best = at
			}
		}
		if best >= 0 {
			return best, nil
		}
	}
	return 0, mismatch(lines, h, cursor, want)
}

// mismatch says where the old lines come closest to matching.
func mismatch(lines []string, h hunk, cursor, want int) error {
	bestAt, bestLen := -1, 0
	for at := cursor; at < len(lines); at++ {
		n := 0
		for n < len(h.old) && at+n < len(lines) && strings.TrimSpace(lines[at+n]) == strings.TrimSpace(h.old[n]) {
			n++
		}
		if n > bestLen || n == bestLen && n > 0 && distance(at, want) < distance(bestAt, want) {
			bestAt, bestLen = at, n
		}
	}
	if bestAt < 0 {
		return fmt.Errorf("its first line %q is not in the file after line %d", h.old[0], cursor)
	}
	line := bestAt + bestLen
	if line >= len(lines) {
		return fmt.Errorf("from line %d the file matches %d of its %d lines, then ends", bestAt+1, bestLen, len(h.old))
	}
	return fmt.Errorf("from line %d the file matches %d of its %d lines; then line %d is %q where the hunk has %q",
		bestAt+1, bestLen, len(h.old), line+1, lines[line], h.old[bestLen])
}

func matchAt(lines []string, at int, old []string, same func(a, b string) bool) bool {
	for i, o := range old {
		if !same(lines[at+i], o) {
			return false
		}
	}
	return true
}

func indexFrom(lines []string, from int, ok func(string) bool) int {
	for i := from; i < len(lines); i++ {
		if ok(lines[i]) {
			return i
		}
	}
	return -1
}

// distance is how many lines apart a and b are.
func distance(a, b int) int {
	if a < b {
		return b - a
	}
	return a - b
}
