// The whole house's layering, in one table: the module's areas, lowest
// first, and the few rules within them. Tailscale's deptest is the model;
// one table in place of a test in each package keeps the rules from
// repeating each other, and a rule whose packages are gone from failing
// silently.
package internal_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/hutchdev/hutch/"

// areas are internal/'s folders and the module's other roots, lowest
// first. An area's code imports its own packages and those of the areas
// below it, never one above: the folders are the architecture's layers,
// and no import loops between them. (Tests may reach up: a runtime's test
// builds a template to run.)
var areas = []struct{ path, is string }{
	{"internal/base", "small packages that know nothing of Hutch"},
	{"api", "the REST API's specification and the agent's protocol"},
	{"client", "the Go SDK: the REST API's wire types"},
	{"console", "the web console's files"},
	{"internal/agent", "the agent, which runs in every sandbox, and the tool catalogue it runs"},
	{"internal/net", "the network: policies, the sandboxes' proxy and namespaces, the build proxy"},
	{"internal/runtime", "what runs a sandbox: the Backend, runc and gVisor, the agent's client"},
	{"internal/storage", "what is kept: the records, the templates' roots, suspended images"},
	{"internal/trust", "who may do what and what stays secret: keys, workspaces, secrets, audit"},
	{"internal/core", "the lifecycle kernel, and the services beside it"},
	{"internal/front", "what clients reach: REST, E2B, MCP, previews"},
	{"internal/cluster", "scale-out: nodes, placement, the API replicas' router"},
	{"internal/app", "the CLI, and the daemon that wires the rest"},
	{"cmd", "the binaries' mains"},
	{"test", "the end-to-end tests, which drive any layer"},
	{"bench", "the benchmarks, which drive any layer (and check the neighbour as the tests do)"},
}

// A rule forbids From's packages To, within what the layers allow. Paths
// are the module's (a trailing "/..." takes a whole tree) or the
// standard library's and others' import paths.
type rule struct {
	from, to string
	// except are packages To covers that From may import.
	except []string
	// deps: every package From depends on, however far, is checked, not
	// only its own imports.
	deps bool
	why  string
}

var rules = []rule{
	{from: "internal/core", to: "internal/core/...", except: []string{"internal/core/hook", "internal/core/create"},
		why: "the services and hooks stand on the kernel (Acquire, Running; the hooks' interfaces in internal/core/hook, a create's options in internal/core/create), not the kernel on them"},
	{from: "internal/core/create", to: "internal/core/...", why: "a create's options stand below the kernel and its hooks"},
	{from: "internal/core/hook", to: "internal/core/...", except: []string{"internal/core/create"}, why: "the hooks' interfaces stand below the kernel and its hooks"},
	{from: "internal/core/quota", to: "internal/core", why: "a hook knows the kernel by internal/core/hook only: the kernel's own tests wire it"},
	{from: "internal/core/network", to: "internal/core", why: "a hook knows the kernel by internal/core/hook only: the kernel's own tests wire it"},
	{from: "internal/core/secretenv", to: "internal/core", why: "a hook knows the kernel by internal/core/hook only: the kernel's own tests wire it"},
	{from: "internal/core/processes", to: "internal/core", why: "a hook knows the kernel by internal/core/hook only: the kernel's own tests wire it"},
	{from: "internal/core/move", to: "internal/core", why: "a hook knows the kernel by internal/core/hook only: the kernel's own tests wire it"},
	{from: "internal/core/memory", to: "internal/core", why: "a hook knows the kernel by internal/core/hook only: the kernel's own tests wire it"},
	{from: "internal/core/metrics", to: "internal/core", why: "a hook knows the kernel by internal/core/hook only: the daemon gives it what a scrape reads"},
	{from: "internal/core/samples", to: "internal/core", why: "a hook knows the kernel by internal/core/hook only: the kernel's own tests wire it"},
	{from: "internal/core/events", to: "internal/core", why: "a hook knows the kernel by internal/core/hook only: the kernel's own tests wire it"},
	{from: "internal/core/lifecyclecmd", to: "internal/core", why: "a hook knows the kernel by internal/core/hook only: the kernel's own tests wire it"},
	{from: "internal/core", to: "net/http", why: "the core speaks no HTTP: the fronts do"},
	{from: "internal/core", to: "internal/agent", why: "the agent runs inside sandboxes; the core talks to it through its client"},
	{from: "internal/runtime/oci", to: "net/http", deps: true, why: "a runtime speaks no HTTP: it dials the agent, whose client speaks to it"},
	{from: "internal/runtime/oci", to: "internal/agent/...", deps: true, why: "a runtime knows nothing of the agent's code: exec and files go through the agent's client"},
	{from: "internal/runtime/oci", to: "internal/storage/...", deps: true, why: "a runtime knows nothing of the store: the core keeps its handles"},
	{from: "internal/front/api", to: "internal/storage/store/...", except: []string{"internal/storage/store"},
		why: "the API reaches records through the core and its services, never a database; it names the store's types (a sandbox's volume mounts)"},
	{from: "internal/front/api", to: "internal/runtime/...", why: "runtimes are the core's business"},
	{from: "internal/front/api", to: "internal/agent", why: "the agent's protocol and types are the core's business"},
	{from: "internal/app/cli", to: "internal/storage/store/...", why: "the CLI never opens the store: it asks the daemon"},
	{from: "internal/app/cli", to: "internal/core/...", why: "the CLI asks the daemon, through client/"},
	{from: "internal/app/cli", to: "internal/runtime/...", why: "the CLI asks the daemon, through client/"},
	{from: "internal/app/cli", to: "internal/front/api", why: "the CLI asks the daemon, through client/"},
	{from: "internal/agent", to: "internal/base/errdefs", deps: true, why: "the agent answers in its protocol's codes; error kinds are the daemon's"},
	{from: "internal/agent", to: "modernc.org/sqlite", deps: true, why: "the agent starts in every sandbox: it carries nothing of the daemon"},
	{from: "internal/agent", to: "k8s.io/...", deps: true, why: "the agent starts in every sandbox: it carries nothing of the daemon"},
}

// confined are packages only some may import, tests included.
var confined = []struct {
	pkg       string
	importers []string
	why       string
}{
	{"internal/agent/agentpb/...", []string{"internal/agent/...", "internal/runtime/agentclient"},
		"only the agent and its client see the agent's protobuf types: the rest speaks Hutch's"},
	{"connectrpc.com/connect", []string{"internal/agent/...", "internal/runtime/agentclient"},
		"the agent's protocol is the agent's and its client's business"},
}

// pkg is one package of the module as go list sees it.
type pkg struct {
	path             string // without the module's prefix
	imports, testing []string
	deps             []string
}

// listModule lists the module's packages: their imports, their tests'
// and everything they depend on.
func listModule(t *testing.T) []pkg {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the layering is read by the go command, which is not in PATH")
	}
	const format = `{{.ImportPath}}|{{join .Imports " "}}|{{join .TestImports " "}} {{join .XTestImports " "}}|{{join .Deps " "}}`
	out, err := exec.CommandContext(t.Context(), goBin, "list", "-f", format, module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	for line := range strings.Lines(string(out)) {
		f := strings.Split(strings.TrimSpace(line), "|")
		if len(f) != 4 {
			t.Fatalf("go list gave %q", line)
		}
		pkgs = append(pkgs, pkg{path: local(f[0]), imports: paths(f[1]), testing: paths(f[2]), deps: paths(f[3])})
	}
	return pkgs
}

func paths(s string) []string {
	var p []string
	for _, f := range strings.Fields(s) {
		p = append(p, local(f))
	}
	return p
}

// local is a module path without the module's prefix.
func local(path string) string {
	if path == strings.TrimSuffix(module, "/") {
		return "."
	}
	return strings.TrimPrefix(path, module)
}

// matches reports whether pattern (a path, or a tree ending in "/...")
// covers path.
func matches(pattern, path string) bool {
	if tree, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == tree || strings.HasPrefix(path, tree+"/")
	}
	return path == pattern
}

// layer is the index in areas of the area path is in, or -1 for a path
// outside the module's areas.
func layer(path string) int {
	for i, a := range areas {
		if matches(a.path+"/...", path) {
			return i
		}
	}
	return -1
}

func TestLayers(t *testing.T) {
	t.Parallel()
	pkgs := listModule(t)
	inModule := map[string]bool{}
	for _, p := range pkgs {
		inModule[p.path] = true
	}
	for _, p := range pkgs {
		if p.path == "internal" {
			continue // this table
		}
		from := layer(p.path)
		if from < 0 {
			t.Errorf("%s is in no area: put it in one of the table's, or add an area", p.path)
			continue
		}
		for _, imp := range p.imports {
			if !inModule[imp] {
				continue
			}
			if to := layer(imp); to > from {
				t.Errorf("%s imports %s: %s (%s) is below %s (%s)",
					p.path, imp, areas[from].path, areas[from].is, areas[to].path, areas[to].is)
			}
		}
	}
}

func TestRules(t *testing.T) {
	t.Parallel()
	pkgs := listModule(t)
	for _, r := range rules {
		found := false
		for _, p := range pkgs {
			if p.path != r.from {
				continue
			}
			found = true
			checked := p.imports
			if r.deps {
				checked = p.deps
			}
			for _, imp := range checked {
				if matches(r.to, imp) && !slices.Contains(r.except, imp) {
					t.Errorf("%s imports %s: %s", p.path, imp, r.why)
				}
			}
		}
		if !found {
			t.Errorf("the rule %s -/-> %s names a package that is gone: mend the rule", r.from, r.to)
		}
	}
	for _, c := range confined {
		for _, p := range pkgs {
			if slices.ContainsFunc(c.importers, func(a string) bool { return matches(a, p.path) }) {
				continue
			}
			for _, imp := range slices.Concat(p.imports, p.testing) {
				if matches(c.pkg, imp) {
					t.Errorf("%s imports %s: %s", p.path, imp, c.why)
				}
			}
		}
	}
}

// Every area of the table has packages: a folder renamed or removed is
// mended in the table, not left behind in it.
func TestAreasExist(t *testing.T) {
	t.Parallel()
	pkgs := listModule(t)
	for _, a := range areas {
		if !slices.ContainsFunc(pkgs, func(p pkg) bool { return matches(a.path+"/...", p.path) }) {
			t.Errorf("the area %s has no package: remove it from the table", a.path)
		}
	}
}

// The agent's own binary, which every sandbox starts, is the agent and
// what the agent imports, and nothing of the daemon: each package it
// carries costs every sandbox's start its initialisation. Of the base
// packages, which know nothing of Hutch, it carries the one the daemon
// and it share a rule by: the timer slack a sandbox's processes start with.
func TestAgentBinary(t *testing.T) {
	t.Parallel()
	agentSide := []string{"cmd/hutch-agent", "internal/agent/...", "api/agent/...", "internal/base/timerslack"}
	pkgs := listModule(t)
	inModule := map[string]bool{}
	for _, p := range pkgs {
		inModule[p.path] = true
	}
	for _, p := range pkgs {
		if p.path != "cmd/hutch-agent" {
			continue
		}
		for _, dep := range p.deps {
			if !inModule[dep] {
				continue // another module's, or the standard library's
			}
			if !slices.ContainsFunc(agentSide, func(a string) bool { return matches(a, dep) }) {
				t.Errorf("cmd/hutch-agent depends on %s, which does not run in a sandbox", dep)
			}
		}
		return
	}
	t.Error("cmd/hutch-agent is gone: mend this test")
}
