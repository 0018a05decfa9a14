package tools

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Patches come in two formats: the unified diff of `diff -u` and `git
// diff`, and the `*** Begin Patch` format coding models are taught to
// write. Both parse into the same changes; apply.go applies them.

// change is what a patch does to one file.
type change struct {
	op     string // opAdd, opUpdate or opDelete
	path   string // as the patch names it
	moveTo string // an update that also renames the file
	hunks  []hunk // of an update
	add    []string
	// addNoEOL: the added file does not end with a newline.
	addNoEOL bool
}

const (
	opAdd    = "add"
	opUpdate = "update"
	opDelete = "delete"
)

// hunk replaces old lines (context and removed) with new ones (context
// and added).
type hunk struct {
	header string // its @@ line, to name it in errors
	// oldStart is where a unified diff says the old lines start (from 1);
	// 0 when unknown.
	oldStart int
	// anchor is the text after a Begin Patch @@: a line the hunk comes
	// after.
	anchor   string
	old, new []string
	// kinds is the hunk's body line by line: ' ' context, '-' removed,
	// '+' added; what old and new are made of.
	kinds []byte
	// oldNoEOL and newNoEOL: the last old (new) line is the file's last,
	// without a newline.
	oldNoEOL, newNoEOL bool
	// atEOF: the hunk must match at the end of the file.
	atEOF bool
}

// parsePatch reads a patch in either format.
func parsePatch(text string) ([]change, error) {
	text = strings.ReplaceAll(text, "\r\n", "\n")
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) == "*** Begin Patch" {
			return parseBeginPatch(lines[i+1:])
		}
	}
	return parseUnified(lines)
}

// parseBeginPatch reads the lines after "*** Begin Patch".
func parseBeginPatch(lines []string) ([]change, error) {
	var changes []change
	var cur *change
	var h *hunk
	endHunk := func() {
		if h != nil && cur != nil && (len(h.old) > 0 || len(h.new) > 0) {
			cur.hunks = append(cur.hunks, *h)
		}
		h = nil
	}
	for i, l := range lines {
		n := i + 2 // the line's number in the patch
		switch {
		case strings.TrimSpace(l) == "*** End Patch":
			endHunk()
			if len(changes) == 0 {
				return nil, invalid("the patch changes no file")
			}
			return changes, nil
		case strings.HasPrefix(l, "*** Add File: "), strings.HasPrefix(l, "*** Update File: "), strings.HasPrefix(l, "*** Delete File: "):
			endHunk()
			op, path, _ := strings.Cut(strings.TrimPrefix(l, "*** "), " File: ")
			changes = append(changes, change{op: strings.ToLower(op), path: strings.TrimSpace(path)})
			cur = &changes[len(changes)-1]
		case cur == nil:
			if strings.TrimSpace(l) != "" {
				return nil, invalid("patch line %d: %q comes before any *** Add, Update or Delete File line", n, l)
			}
		case strings.HasPrefix(l, "*** Move to: "):
			if cur.op != opUpdate {
				return nil, invalid("patch line %d: *** Move to: follows an %s, not an update", n, cur.op)
			}
			cur.moveTo = strings.TrimSpace(strings.TrimPrefix(l, "*** Move to: "))
		case l == "*** End of File":
			if h != nil {
				h.atEOF = true
			}
		case cur.op == opAdd:
			if !strings.HasPrefix(l, "+") {
				return nil, invalid("patch line %d: a line of an added file must start with +, got %q", n, l)
			}
			cur.add = append(cur.add, l[1:])
		case cur.op == opDelete:
			if strings.TrimSpace(l) != "" {
				return nil, invalid("patch line %d: a deleted file takes no lines, got %q", n, l)
			}
		case strings.HasPrefix(l, "@@"):
			endHunk()
			h = &hunk{header: l, anchor: strings.TrimSpace(strings.TrimPrefix(l, "@@"))}
		default:
			if h == nil {
				h = &hunk{header: fmt.Sprintf("the hunk at patch line %d", n)}
			}
			if err := h.addLine(l, n); err != nil {
				return nil, err
			}
		}
	}
	return nil, invalid("the patch has no *** End Patch line")
}

// addLine adds a line of a hunk body: ' ' context, '-' removed, '+' added.
// An empty line counts as an empty context line (editors strip the space).
func (h *hunk) addLine(l string, n int) error {
	if l == "" {
		l = " "
	}
	switch l[0] {
	case ' ':
		h.old, h.new = append(h.old, l[1:]), append(h.new, l[1:])
	case '-':
		h.old = append(h.old, l[1:])
	case '+':
		h.new = append(h.new, l[1:])
	default:
		return invalid("patch line %d: a hunk line must start with a space, - or +, got %q", n, l)
	}
	h.kinds = append(h.kinds, l[0])
	return nil
}

var hunkHeader = regexp.MustCompile(`^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@`)

// parseUnified reads a unified diff, with git's extended headers.
func parseUnified(lines []string) ([]change, error) {
	var changes []change
	var cur *change
	var renameFrom string
	for i := 0; i < len(lines); i++ {
		l, n := lines[i], i+1
		switch {
		case strings.HasPrefix(l, "diff --git "):
			cur, renameFrom = nil, ""
		case strings.HasPrefix(l, "rename from "):
			renameFrom = strings.TrimPrefix(l, "rename from ")
		case strings.HasPrefix(l, "rename to ") && renameFrom != "":
			changes = append(changes, change{op: opUpdate, path: renameFrom, moveTo: strings.TrimPrefix(l, "rename to ")})
			cur = &changes[len(changes)-1]
		case strings.HasPrefix(l, "--- ") && i+1 < len(lines) && strings.HasPrefix(lines[i+1], "+++ "):
			from, to := diffPath(l[4:]), diffPath(lines[i+1][4:])
			i++
			if cur != nil && cur.moveTo != "" && from == cur.path {
				continue // the hunks of a rename
			}
			c := change{op: opUpdate, path: from}
			switch {
			case from == "/dev/null" && to == "/dev/null":
				return nil, invalid("patch line %d: both sides are /dev/null", n)
			case from == "/dev/null":
				c = change{op: opAdd, path: to}
			case to == "/dev/null":
				c.op = opDelete
			case to != from:
				c.moveTo = to
			}
			changes = append(changes, c)
			cur = &changes[len(changes)-1]
		case strings.HasPrefix(l, "@@"):
			if cur == nil {
				return nil, invalid("patch line %d: a hunk before any --- and +++ lines", n)
			}
			m := hunkHeader.FindStringSubmatch(l)
			if m == nil {
				return nil, invalid("patch line %d: %q is not a hunk header (@@ -l,s +l,s @@)", n, l)
			}
			oldStart, oldCount, newCount, ok := headerNumbers(m)
			if !ok {
				return nil, invalid("patch line %d: the numbers of %q are too large for a file's lines", n, l)
			}
			h := hunk{header: l, oldStart: oldStart}
			for i+1 < len(lines) && (oldCount > 0 || newCount > 0 || strings.HasPrefix(lines[i+1], `\`)) {
				i++
				body := lines[i]
				if strings.HasPrefix(body, `\`) { // "\ No newline at end of file", of the line before
					switch prev := lines[i-1]; {
					case strings.HasPrefix(prev, "+"):
						h.newNoEOL = true
					case strings.HasPrefix(prev, "-"):
						h.oldNoEOL = true
					default:
						h.oldNoEOL, h.newNoEOL = true, true
					}
					continue
				}
				if err := h.addLine(body, i+1); err != nil {
					return nil, err
				}
				switch {
				case body == "" || body[0] == ' ':
					oldCount, newCount = oldCount-1, newCount-1
				case body[0] == '-':
					oldCount--
				default:
					newCount--
				}
			}
			if oldCount != 0 || newCount != 0 {
				return nil, invalid("patch: the hunk %q has fewer lines than its header says", l)
			}
			if cur.op == opAdd {
				cur.add, cur.addNoEOL = append(cur.add, h.new...), h.newNoEOL
			} else if cur.op == opUpdate {
				cur.hunks = append(cur.hunks, h)
			}
		}
	}
	if len(changes) == 0 {
		return nil, invalid("no change found: give a unified diff (--- and +++ lines, then @@ hunks) or a *** Begin Patch block")
	}
	return changes, nil
}

// headerNumbers reads a hunk header's old start and both line counts (a
// count left out is 1). No file has more lines than an int32 holds, so a
// larger number is refused: one near the int's limit would overflow where
// the hunk is placed.
func headerNumbers(m []string) (oldStart, oldCount, newCount int, ok bool) {
	var nums [3]int
	for i, s := range []string{m[1], m[2], m[4]} {
		if s == "" {
			nums[i] = 1
			continue
		}
		v, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			return 0, 0, 0, false
		}
		nums[i] = int(v)
	}
	return nums[0], nums[1], nums[2], true
}

// diffPath reads the path of a --- or +++ line: without git's a/ or b/,
// or the timestamp diff -u puts after a tab.
func diffPath(s string) string {
	s, _, _ = strings.Cut(s, "\t")
	s = strings.TrimSpace(s)
	if s == "/dev/null" {
		return s
	}
	if strings.HasPrefix(s, "a/") || strings.HasPrefix(s, "b/") {
		return s[2:]
	}
	return s
}
