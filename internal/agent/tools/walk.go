package tools

import (
	"bufio"
	"errors"
	"io/fs"
	"path"
	"path/filepath"
	"strings"
)

// The search tools walk a tree as ripgrep does by default: hidden files and
// directories are skipped, and so is what .gitignore (or .ignore) files
// exclude, each applying to its own directory and below. A path the
// caller names is searched whatever the rules say.

// ignoreRule is one line of an ignore file.
type ignoreRule struct {
	base    string // the directory of its file, relative to the walk's root ("" for the root)
	pattern string
	negate  bool // !pattern: brings back what an earlier rule excluded
	dirOnly bool // pattern/: directories only
	// anchored: the pattern has a / before its end, so it names a path
	// from base, not a name at any depth.
	anchored bool
}

// readIgnoreFile reads the rules of .gitignore or .ignore in dir (rel is
// dir relative to the walk's root).
func readIgnoreFile(fsys fsys, dir, rel string) []ignoreRule {
	var rules []ignoreRule
	for _, name := range []string{".gitignore", ".ignore"} {
		f, err := fsys.Open(filepath.Join(dir, name))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := strings.TrimRight(sc.Text(), " \t\r")
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			r := ignoreRule{base: rel}
			if r.negate = strings.HasPrefix(line, "!"); r.negate {
				line = line[1:]
			}
			line = strings.TrimPrefix(line, `\`) // \# and \! name files starting so
			if r.dirOnly = strings.HasSuffix(line, "/"); r.dirOnly {
				line = strings.TrimSuffix(line, "/")
			}
			r.anchored = strings.Contains(line, "/")
			r.pattern = strings.TrimPrefix(line, "/")
			if r.pattern != "" {
				rules = append(rules, r)
			}
		}
		_ = f.Close()
	}
	return rules
}

// ignored says whether path rel (from the walk's root) is excluded by
// rules, the last matching rule deciding.
func ignored(rules []ignoreRule, rel string, isDir bool) bool {
	out := false
	for _, r := range rules {
		if r.dirOnly && !isDir {
			continue
		}
		sub := rel
		if r.base != "" {
			var ok bool
			if sub, ok = strings.CutPrefix(rel, r.base+"/"); !ok {
				continue
			}
		}
		var match bool
		if r.anchored {
			match = globMatch(r.pattern, sub)
		} else {
			match = globMatch(r.pattern, path.Base(sub))
		}
		if match {
			out = !r.negate
		}
	}
	return out
}

// globMatch matches name against a glob of path.Match's syntax in which **
// also matches any number of whole path elements.
func globMatch(pattern, name string) bool {
	if !strings.Contains(pattern, "**") {
		ok, _ := path.Match(pattern, name)
		return ok
	}
	pp, np := strings.Split(pattern, "/"), strings.Split(name, "/")
	var match func(pi, ni int) bool
	match = func(pi, ni int) bool {
		for pi < len(pp) {
			if pp[pi] == "**" {
				for k := ni; k <= len(np); k++ {
					if match(pi+1, k) {
						return true
					}
				}
				return false
			}
			if ni >= len(np) {
				return false
			}
			if ok, _ := path.Match(pp[pi], np[ni]); !ok {
				return false
			}
			pi, ni = pi+1, ni+1
		}
		return ni == len(np)
	}
	return match(0, 0)
}

// errStop ends a walk early, as a fn of walkTree asks.
var errStop = errors.New("stop")

// walkTree calls fn with every regular file under root that the rules
// leave in, and its path relative to root, in lexical order. fn returns
// errStop to end the walk.
func (f Files) walkTree(root string, fn func(p, rel string) error) error {
	rulesAt := map[string][]ignoreRule{}
	err := f.fs.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == root {
				return err
			}
			return nil // an unreadable directory is skipped
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		parentRel := path.Dir(rel)
		if rel == "." {
			rel, parentRel = "", ""
		} else if parentRel == "." {
			parentRel = ""
		}
		rules := rulesAt[parentRel]
		if rel != "" {
			if strings.HasPrefix(d.Name(), ".") || ignored(rules, rel, d.IsDir()) {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
		}
		if d.IsDir() {
			rulesAt[rel] = append(append([]ignoreRule(nil), rules...), readIgnoreFile(f.fs, p, rel)...)
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		return fn(p, rel)
	})
	if errors.Is(err, errStop) {
		return nil
	}
	return err
}
