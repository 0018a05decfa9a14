package rootfs

import "slices"

// Recipe is what one of Hutch's default templates is built from: Debian
// packages, then npm packages.
type Recipe struct {
	Packages    []string
	NpmPackages []string
	// Programs are the language runtimes it has, by command name.
	Programs []string
}

// basePackages are what agents expect of a sandbox: a shell and the core
// tools, Python with pip and venv, Node.js with npm, git, ripgrep, curl,
// jq, sqlite3, unzip and a C toolchain.
var basePackages = []string{
	"bash", "coreutils", "procps", "ca-certificates", "curl", "git", "ripgrep", "jq",
	"sqlite3", "unzip", "build-essential", "python3", "python3-pip", "python3-venv",
	"nodejs", "npm",
}

// recipes are the default templates, by name: base, which ./setup builds;
// python, base with the data stack, Flask for web apps, and Jupyter's
// ipykernel, which python code contexts run on (matplotlib's figures come back as PNG
// through it; its fonts come with python-matplotlib-data); browser, base
// with Chromium and agent-browser, a CLI that drives it for agents
// (`agent-browser open URL && agent-browser snapshot`); and agent, the
// browser with Claude Code; desktop, the browser's with an Xfce desktop
// on a virtual screen (desktopPackages). Deno and Bun come from their npm
// packages, which carry their official binaries; Deno's Jupyter kernel
// serves javascript and typescript contexts. agent-browser's and Claude Code's
// npm packages carry theirs too, so Debian's older Node.js, which their
// package.json says is too old, only installs them.
var recipes = map[string]Recipe{
	"base": {Packages: basePackages, NpmPackages: []string{"deno", "bun"}, Programs: basePrograms},
	"python": {
		Packages:    append(append([]string{}, basePackages...), "python3-numpy", "python3-pandas", "python3-matplotlib", "python3-ipykernel", "python3-flask"),
		NpmPackages: []string{"deno", "bun"},
		Programs:    basePrograms,
	},
	"browser": {
		Packages:    append(append([]string{}, basePackages...), browserPackages...),
		NpmPackages: []string{"deno", "bun", "agent-browser"},
		Programs:    basePrograms,
	},
	"desktop": {
		Packages:    append(append(append([]string{}, basePackages...), browserPackages...), desktopPackages...),
		NpmPackages: []string{"deno", "bun"},
		Programs:    basePrograms,
	},
	"agent": {
		Packages:    append(append([]string{}, basePackages...), browserPackages...),
		NpmPackages: []string{"deno", "bun", "agent-browser", "@anthropic-ai/claude-code"},
		Programs:    basePrograms,
	},
}

// browserPackages are Debian's Chromium and Liberation, fonts of the
// metrics of the Arial, Times New Roman and Courier New that pages name.
// agent-browser finds chromium on PATH; Debian's launcher of it runs it
// without Chromium's own sandbox in a template (see letChromiumRun).
var browserPackages = []string{"chromium", "fonts-liberation"}

// desktopPackages are a Linux desktop an agent or a person can see and
// drive, with the programs E2B's Desktop SDK runs (docs/desktop.md): the X
// server Xvfb and its tools (xdpyinfo, xrandr), Xfce with its terminal
// (started by startxfce4 under dbus-launch), x11vnc and noVNC with
// websockify for the live view, xdotool and scrot for input and
// screenshots, xdg-open and gtk-launch to open files and applications,
// netstat (the SDK waits for noVNC's port with it), Firefox ESR beside
// the browser template's Chromium, and DejaVu fonts for the desktop's own
// text.
var desktopPackages = []string{
	"xvfb", "x11-utils", "x11-xserver-utils", "xauth", "dbus-x11",
	"xfce4", "xfce4-terminal", "x11vnc", "novnc", "python3-websockify",
	"xdotool", "scrot", "xdg-utils", "libgtk-3-bin", "net-tools",
	"firefox-esr", "fonts-dejavu-core",
}

var basePrograms = []string{"bash", "sh", "python3", "node", "deno", "bun"}

// RecipeFor returns the recipe of a default template (base, python,
// browser, desktop, agent).
func RecipeFor(name string) (Recipe, bool) {
	r, ok := recipes[name]
	return r, ok
}

// recipeOrder is the default templates from the smallest: the order
// RecipesWith names them in, the first the one to suggest.
var recipeOrder = []string{"base", "python", "browser", "desktop", "agent"}

// RecipesWith names the default templates that have program, the
// smallest first.
func RecipesWith(program string) []string {
	var names []string
	for _, name := range recipeOrder {
		if slices.Contains(recipes[name].Programs, program) {
			names = append(names, name)
		}
	}
	return names
}
