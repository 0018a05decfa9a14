package api

import (
	"bufio"
	"bytes"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/api"
)

// Every route the server serves is in api/openapi.yaml, and every
// operation there is served: the document cannot drift from the code.
func TestRoutesMatchOpenAPI(t *testing.T) {
	t.Parallel()
	documented := openAPIOperations(t)
	var served []string
	for _, r := range (&Server{}).routes() {
		served = append(served, r.pattern)
	}
	for _, op := range served {
		if !slices.Contains(documented, op) {
			t.Errorf("%s is served but not in api/openapi.yaml", op)
		}
	}
	// Previews take every method, beside the table (see Handler);
	// OpenAPI writes their {path...} as {path}.
	previewPath := strings.Replace(previewPattern, "{path...}", "{path}", 1)
	if !slices.Contains(documented, "GET "+previewPath) {
		t.Errorf("previews (%s) are served but not in api/openapi.yaml", previewPattern)
	}
	for _, op := range documented {
		if strings.HasSuffix(op, " "+mcpPath) || strings.HasSuffix(op, " "+previewPath) {
			continue // the MCP server's and the previews', every method (see Handler)
		}
		if !slices.Contains(served, op) {
			t.Errorf("%s is in api/openapi.yaml but not served", op)
		}
	}
	if len(served) < 40 {
		t.Errorf("only %d routes found: the table is not being read", len(served))
	}
}

// openAPIOperations lists the document's operations as ServeMux patterns
// ("GET /v1/sandboxes/{id}"), read from its paths section: paths at two
// spaces of indent, their methods at four (the document is written so).
func openAPIOperations(t *testing.T) []string {
	t.Helper()
	pathLine := regexp.MustCompile(`^  (/\S*):\s*$`)
	methodLine := regexp.MustCompile(`^    (get|put|post|patch|delete):`)
	var ops []string
	inPaths, path := false, ""
	sc := bufio.NewScanner(bytes.NewReader(api.OpenAPI))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "paths:":
			inPaths = true
		case inPaths && line != "" && !strings.HasPrefix(line, " ") && !strings.HasPrefix(line, "#"):
			inPaths = false // the next top-level section
		case !inPaths:
		case pathLine.MatchString(line):
			path = pathLine.FindStringSubmatch(line)[1]
		case methodLine.MatchString(line) && path != "":
			ops = append(ops, strings.ToUpper(methodLine.FindStringSubmatch(line)[1])+" "+path)
		}
	}
	if len(ops) == 0 {
		t.Fatal("no operations found in api/openapi.yaml")
	}
	return ops
}
