package tools

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Bounds of a search.
const (
	defaultGrepResults = 100
	maxGrepResults     = 1000
	maxGrepContext     = 5
	maxGrepFileBytes   = 16 << 20 // larger files are skipped by the built-in search
	maxGrepLineBytes   = 500      // a longer matching line is cut in the result
	grepTimeout        = 60 * time.Second
)

type grepArgs struct {
	Pattern         string   `json:"pattern"`
	Path            string   `json:"path"`
	Glob            []string `json:"glob"`
	Context         int      `json:"context"`
	MaxResults      int      `json:"max_results"`
	CaseInsensitive bool     `json:"case_insensitive"`
}

// GrepMatch is one matching line.
type GrepMatch struct {
	Path   string   `json:"path"` // relative to the searched path
	Line   int      `json:"line"`
	Text   string   `json:"text"`
	Before []string `json:"before,omitempty"`
	After  []string `json:"after,omitempty"`
}

// GrepResult is what sandbox_grep_files returns.
type GrepResult struct {
	Path      string      `json:"path"`
	Matches   []GrepMatch `json:"matches"`
	Truncated bool        `json:"truncated,omitempty"`
	// Engine is "ripgrep" when the sandbox has rg, else "builtin".
	Engine string `json:"engine"`
}

func (f Files) grepFiles(a grepArgs) (GrepResult, error) {
	root, err := f.dirOrDefault(a.Path)
	if err != nil {
		return GrepResult{}, err
	}
	if a.Pattern == "" {
		return GrepResult{}, invalid("pattern is required")
	}
	expr := a.Pattern
	if a.CaseInsensitive {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return GrepResult{}, invalid("pattern is not a regular expression (RE2 syntax): %v", err)
	}
	if a.Context < 0 || a.Context > maxGrepContext {
		return GrepResult{}, invalid("context must be between 0 and %d", maxGrepContext)
	}
	if a.MaxResults == 0 {
		a.MaxResults = defaultGrepResults
	}
	if a.MaxResults < 0 || a.MaxResults > maxGrepResults {
		return GrepResult{}, invalid("max_results must be between 1 and %d", maxGrepResults)
	}
	for _, g := range a.Glob {
		if _, err := path.Match(strings.TrimPrefix(g, "!"), ""); err != nil {
			return GrepResult{}, invalid("glob %q: %v", g, err)
		}
	}
	if _, err := f.fs.Stat(root); err != nil {
		return GrepResult{}, fileError(err)
	}
	res := GrepResult{Path: root, Matches: []GrepMatch{}}
	// Confined, the search is the built-in one, through f.fs: ripgrep
	// would open paths by itself, as the daemon's user.
	if rg, err := exec.LookPath("rg"); err == nil && !f.Confined {
		res.Engine = "ripgrep"
		err = f.ripgrep(rg, root, a, &res)
		return res, err
	}
	res.Engine = "builtin"
	return res, f.grepTree(root, re, a, &res)
}

// globsAllow says whether rel passes the globs: a name must match one of
// the plain globs (when there are any) and none of the !globs. A glob
// without / matches the file's name, one with / its path.
func globsAllow(globs []string, rel string) bool {
	included, hasInclude := false, false
	for _, g := range globs {
		neg := strings.HasPrefix(g, "!")
		g = strings.TrimPrefix(g, "!")
		target := path.Base(rel)
		if strings.Contains(g, "/") {
			target = rel
		}
		m := globMatch(g, target)
		if neg && m {
			return false
		}
		if !neg {
			hasInclude = true
			included = included || m
		}
	}
	return included || !hasInclude
}

// grepTree is the built-in search, for sandboxes without ripgrep.
func (f Files) grepTree(root string, re *regexp.Regexp, a grepArgs, res *GrepResult) error {
	return fileError0(f.walkTree(root, func(p, rel string) error {
		if rel == "" {
			rel = filepath.Base(p) // root is a file
		}
		if !globsAllow(a.Glob, rel) {
			return nil
		}
		if fi, err := f.fs.Stat(p); err != nil || fi.Size() > maxGrepFileBytes {
			return nil
		}
		data, err := f.fs.ReadFile(p)
		if err != nil || isBinary(data[:min(len(data), sniffBytes)]) {
			return nil
		}
		lines := strings.Split(strings.TrimSuffix(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n"), "\n")
		for i, line := range lines {
			if !re.MatchString(line) {
				continue
			}
			if len(res.Matches) == a.MaxResults {
				res.Truncated = true
				return errStop
			}
			m := GrepMatch{Path: rel, Line: i + 1, Text: cutLine(line)}
			for j := max(0, i-a.Context); j < i; j++ {
				m.Before = append(m.Before, cutLine(lines[j]))
			}
			for j := i + 1; j <= min(len(lines)-1, i+a.Context); j++ {
				m.After = append(m.After, cutLine(lines[j]))
			}
			res.Matches = append(res.Matches, m)
		}
		return nil
	}))
}

func cutLine(s string) string {
	if len(s) <= maxGrepLineBytes {
		return strings.ToValidUTF8(s, "\uFFFD")
	}
	cut := s[:maxGrepLineBytes]
	for !utf8.ValidString(cut) && len(cut) > maxGrepLineBytes-utf8.UTFMax {
		cut = cut[:len(cut)-1]
	}
	return strings.ToValidUTF8(cut, "\uFFFD") + " …"
}

// ripgrep runs rg --json and reads its matches and context lines.
func (f Files) ripgrep(rg, root string, a grepArgs, res *GrepResult) error {
	args := []string{rg, "--json", "--no-config", "--no-require-git", "--sort", "path", "-C", strconv.Itoa(a.Context)}
	if a.CaseInsensitive {
		args = append(args, "-i")
	}
	for _, g := range a.Glob {
		args = append(args, "-g", g)
	}
	args = append(args, "-e", a.Pattern, "--", ".")
	if fi, err := os.Stat(root); err == nil && !fi.IsDir() {
		args[len(args)-1] = filepath.Base(root)
		root = filepath.Dir(root)
	}
	ctx, cancel := context.WithTimeout(context.Background(), grepTimeout)
	defer cancel()
	out, w := io.Pipe()
	var stderr bytes.Buffer
	done := make(chan error, 1)
	go func() {
		err := f.exec(ctx, root, args, w, &stderr)
		_ = w.Close()
		done <- err
	}()
	err := readRipgrep(out, a, res)
	cancel() // rg has said enough, or all
	_ = out.Close()
	runErr := <-done
	var exit *ExitError
	switch {
	case err != nil:
		return err
	case errors.As(runErr, &exit) && exit.Code == 1:
		return nil // no match
	case runErr != nil && !res.Truncated:
		return &Error{Kind: KindFailed, Message: fmt.Sprintf("ripgrep: %v: %s", runErr, strings.TrimSpace(stderr.String()))}
	}
	return nil
}

// readRipgrep reads rg --json's events into res, until the end or
// a.MaxResults.
func readRipgrep(out io.Reader, a grepArgs, res *GrepResult) error {
	type rgText struct {
		Text string `json:"text"`
	}
	var event struct {
		Type string `json:"type"`
		Data struct {
			Path       rgText `json:"path"`
			Lines      rgText `json:"lines"`
			LineNumber int    `json:"line_number"`
		} `json:"data"`
	}
	var pending []string // context lines before the next match
	var last *GrepMatch
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		if err := json.Unmarshal(sc.Bytes(), &event); err != nil {
			continue
		}
		text := strings.TrimRight(event.Data.Lines.Text, "\r\n")
		rel := strings.TrimPrefix(filepath.ToSlash(event.Data.Path.Text), "./")
		switch event.Type {
		case "begin":
			pending, last = nil, nil
		case "context":
			if last != nil && event.Data.LineNumber > last.Line && len(last.After) < a.Context {
				last.After = append(last.After, cutLine(text))
			} else {
				pending = append(pending, cutLine(text))
			}
		case "match":
			if len(res.Matches) == a.MaxResults {
				res.Truncated = true
				return nil
			}
			before := pending
			if len(before) > a.Context {
				before = before[len(before)-a.Context:]
			}
			res.Matches = append(res.Matches, GrepMatch{Path: rel, Line: event.Data.LineNumber, Text: cutLine(text), Before: before})
			last, pending = &res.Matches[len(res.Matches)-1], nil
		}
	}
	return nil
}
