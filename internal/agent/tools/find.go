package tools

import (
	"path"
	"sort"
	"strings"
	"unicode"
)

// Bounds of a file-name search.
const (
	defaultFindResults = 50
	maxFindResults     = 500
	maxFindWalk        = 200_000 // files looked at, at most
)

type findArgs struct {
	Query      string `json:"query"`
	Path       string `json:"path"`
	MaxResults int    `json:"max_results"`
}

// FoundFile is one file a name search found.
type FoundFile struct {
	Path  string `json:"path"` // relative to the searched path
	Score int    `json:"score"`
}

// FindResult is what sandbox_find_files returns, best first.
type FindResult struct {
	Path      string      `json:"path"`
	Files     []FoundFile `json:"files"`
	Truncated bool        `json:"truncated,omitempty"`
}

func (f Files) findFiles(a findArgs) (FindResult, error) {
	root, err := f.dirOrDefault(a.Path)
	if err != nil {
		return FindResult{}, err
	}
	query := strings.ToLower(strings.Join(strings.Fields(a.Query), ""))
	if query == "" {
		return FindResult{}, invalid("query is required")
	}
	if a.MaxResults == 0 {
		a.MaxResults = defaultFindResults
	}
	if a.MaxResults < 0 || a.MaxResults > maxFindResults {
		return FindResult{}, invalid("max_results must be between 1 and %d", maxFindResults)
	}
	res := FindResult{Path: root, Files: []FoundFile{}}
	seen := 0
	err = f.walkTree(root, func(_, rel string) error {
		if seen++; seen > maxFindWalk {
			res.Truncated = true
			return errStop
		}
		if score, ok := fuzzyScore(query, rel); ok {
			res.Files = append(res.Files, FoundFile{Path: rel, Score: score})
		}
		return nil
	})
	if err != nil {
		return FindResult{}, fileError(err)
	}
	sort.SliceStable(res.Files, func(i, j int) bool {
		if res.Files[i].Score != res.Files[j].Score {
			return res.Files[i].Score > res.Files[j].Score
		}
		return len(res.Files[i].Path) < len(res.Files[j].Path)
	})
	if len(res.Files) > a.MaxResults {
		res.Files, res.Truncated = res.Files[:a.MaxResults], true
	}
	return res, nil
}

// fuzzyScore scores how well query's characters, in order, match rel: a
// match in the file's name counts more than one in its directories, a run
// of consecutive characters and a match at the start of a word more than
// scattered ones. ok is false when the characters are not all there.
func fuzzyScore(query, rel string) (score int, ok bool) {
	lower := strings.ToLower(rel)
	nameStart := strings.LastIndexByte(rel, '/') + 1
	if strings.Contains(strings.ToLower(path.Base(rel)), query) {
		score += 100 // the name holds the query whole
	}
	qi, run := 0, 0
	for i := 0; i < len(lower) && qi < len(query); i++ {
		if lower[i] != query[qi] {
			run = 0
			continue
		}
		qi++
		run++
		score += run * 2 // consecutive characters count more and more
		if i >= nameStart {
			score += 3
		}
		if i == 0 || strings.ContainsRune("/_-. ", rune(rel[i-1])) || unicode.IsUpper(rune(rel[i])) && unicode.IsLower(rune(rel[i-1])) {
			score += 5 // the start of a word
		}
	}
	if qi < len(query) {
		return 0, false
	}
	return score - len(rel)/10, true
}
