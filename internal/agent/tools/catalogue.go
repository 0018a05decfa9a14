package tools

import (
	"encoding/json"
	"strings"
)

// Tool names.
const (
	ReadFile      = "sandbox_read_file"
	WriteFile     = "sandbox_write_file"
	FindReplace   = "sandbox_find_replace"
	ApplyPatch    = "sandbox_apply_patch"
	DeleteFile    = "sandbox_delete_file"
	ListDirectory = "sandbox_list_directory"
	GrepFiles     = "sandbox_grep_files"
	FindFiles     = "sandbox_find_files"
	RunCommand    = "sandbox_run_command"
	RunCode       = "sandbox_run_code"
	DownloadURL   = "sandbox_download_url"
	Checkpoint    = "sandbox_checkpoint"
	Diff          = "sandbox_diff"
	Rollback      = "sandbox_rollback"

	// The computer tools drive the sandbox's desktop (template desktop).
	ComputerScreenshot = "sandbox_computer_screenshot"
	ComputerMove       = "sandbox_computer_move"
	ComputerClick      = "sandbox_computer_click"
	ComputerDrag       = "sandbox_computer_drag"
	ComputerScroll     = "sandbox_computer_scroll"
	ComputerType       = "sandbox_computer_type"
	ComputerKey        = "sandbox_computer_key"
	ComputerWait       = "sandbox_computer_wait"
	ComputerCursor     = "sandbox_computer_cursor_position"
)

// Computer says the tool is one of the computer tools.
func Computer(name string) bool { return strings.HasPrefix(name, "sandbox_computer_") }

// Tool is a tool as a model is offered it.
type Tool struct {
	Name string `json:"name"`
	// Description tells a model what the tool does and when to use it.
	Description string `json:"description"`
	// Schema is the JSON schema of its arguments.
	Schema json.RawMessage `json:"input_schema"`
	// InSandbox says the sandbox's agent runs it (Files.Run); the others
	// the daemon runs.
	InSandbox bool `json:"-"`
	// Mutates says it may change the sandbox's files: a sandbox with
	// checkpoints per tool call takes one before it runs.
	Mutates bool `json:"-"`
}

// Catalogue is every tool, in the order they are offered.
var Catalogue = []Tool{
	{
		Name: ReadFile, InSandbox: true,
		Description: "Read a text file in the sandbox. Returns its lines numbered from 1 (a line " +
			"number, a tab, then the line), at most 2000 lines or 256 KiB per call: give start_line " +
			"and end_line to read a part of a long file, as `truncated` and `next_start_line` say. " +
			"Relative paths are in /home/user/workspace. A binary file is described (its size and " +
			"kind), not shown. Read a file before editing it.",
		Schema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "File to read: absolute, or relative to /home/user/workspace."},
    "start_line": {"type": "integer", "minimum": 1, "description": "First line to return (default 1)."},
    "end_line": {"type": "integer", "minimum": 1, "description": "Last line to return (default: as many as fit)."}
  },
  "required": ["path"],
  "additionalProperties": false
}`),
	},
	{
		Name: WriteFile, InSandbox: true, Mutates: true,
		Description: "Create a file in the sandbox, or replace one, with the given content; missing " +
			"parent directories are made. The write is atomic: readers see the old file or the new " +
			"one, never half. Prefer sandbox_find_replace or sandbox_apply_patch to change part of " +
			"an existing file.",
		Schema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "File to write: absolute, or relative to /home/user/workspace."},
    "content": {"type": "string", "description": "The whole new content of the file."}
  },
  "required": ["path", "content"],
  "additionalProperties": false
}`),
	},
	{
		Name: FindReplace, InSandbox: true, Mutates: true,
		Description: "Replace exact text in one file of the sandbox. `find` must match the file's " +
			"text exactly, whitespace and line breaks included, and appear exactly once, unless " +
			"replace_all is true; otherwise nothing changes and the error says whether the text was " +
			"missing or on which lines it appears. Include enough surrounding lines to make the " +
			"match unique. Returns how many replacements were made.",
		Schema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "File to edit: absolute, or relative to /home/user/workspace."},
    "find": {"type": "string", "minLength": 1, "description": "Exact text to find."},
    "replace": {"type": "string", "description": "Text to put in its place."},
    "replace_all": {"type": "boolean", "description": "Replace every occurrence (default false: exactly one must exist)."}
  },
  "required": ["path", "find", "replace"],
  "additionalProperties": false
}`),
	},
	{
		Name: ApplyPatch, InSandbox: true, Mutates: true,
		Description: "Apply a patch that adds, changes, moves or deletes files in the sandbox. Give " +
			"either a unified diff (as `git diff` or `diff -u` print it) or the `*** Begin Patch` / " +
			"`*** Add File:` / `*** Update File:` / `*** Delete File:` / `*** End Patch` format. The " +
			"patch applies whole or not at all: if one hunk does not match, no file changes, and " +
			"the error names the file, the hunk and the line it expected.",
		Schema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "patch": {"type": "string", "description": "The patch text."}
  },
  "required": ["patch"],
  "additionalProperties": false
}`),
	},
	{
		Name: DeleteFile, InSandbox: true, Mutates: true,
		Description: "Delete a file, a symlink (not what it points to) or an empty directory in the " +
			"sandbox; with recursive true, a directory and everything in it.",
		Schema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "What to delete: absolute, or relative to /home/user/workspace."},
    "recursive": {"type": "boolean", "description": "Delete a directory with everything in it (default false)."}
  },
  "required": ["path"],
  "additionalProperties": false
}`),
	},
	{
		Name: ListDirectory, InSandbox: true,
		Description: "List a directory of the sandbox: each entry's path (relative to the directory), " +
			"type (file, dir or symlink), size in bytes and modification time, sorted by path, " +
			"down to `depth` levels (default 1, at most 5), at most 1000 entries. Symlinks are " +
			"listed, not followed.",
		Schema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "Directory to list (default /home/user/workspace)."},
    "depth": {"type": "integer", "minimum": 1, "maximum": 5, "description": "Levels to descend (default 1: its own entries)."}
  },
  "additionalProperties": false
}`),
	},
	{
		Name: GrepFiles, InSandbox: true,
		Description: "Search the contents of files in the sandbox for a regular expression (RE2 " +
			"syntax, as ripgrep's). Returns each matching line with its file (relative to `path`), " +
			"line number and, with `context`, the lines around it; at most max_results (default " +
			"100), `truncated` saying there were more. Like ripgrep, it skips hidden files, binary " +
			"files and what .gitignore excludes. `glob` narrows the files: [\"*.py\"], or " +
			"[\"!*_test.go\"] to leave some out.",
		Schema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "pattern": {"type": "string", "minLength": 1, "description": "Regular expression to find."},
    "path": {"type": "string", "description": "File or directory to search (default /home/user/workspace)."},
    "glob": {"type": "array", "items": {"type": "string"}, "description": "File name globs to search (a leading ! excludes)."},
    "context": {"type": "integer", "minimum": 0, "maximum": 5, "description": "Lines of context before and after each match (default 0)."},
    "max_results": {"type": "integer", "minimum": 1, "maximum": 1000, "description": "Matches to return at most (default 100)."},
    "case_insensitive": {"type": "boolean", "description": "Ignore case (default false)."}
  },
  "required": ["pattern"],
  "additionalProperties": false
}`),
	},
	{
		Name: FindFiles, InSandbox: true,
		Description: "Find files in the sandbox by a fuzzy match of their path: the query's " +
			"characters in order, not necessarily together (\"srvmain\" finds server/main.go). " +
			"Returns paths relative to `path`, best match first: a match in the file's name, in " +
			"one run or at word starts ranks higher. Skips hidden files and what .gitignore " +
			"excludes.",
		Schema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "query": {"type": "string", "minLength": 1, "description": "Characters of the path to find, in order."},
    "path": {"type": "string", "description": "Directory to search (default /home/user/workspace)."},
    "max_results": {"type": "integer", "minimum": 1, "maximum": 500, "description": "Files to return at most (default 50)."}
  },
  "required": ["query"],
  "additionalProperties": false
}`),
	},
	{
		Name: RunCommand, Mutates: true,
		Description: "Run a shell command (bash -c) in the sandbox, as the sandbox user, in " +
			"/home/user/workspace unless cwd says otherwise. Returns its exit code, stdout and " +
			"stderr; output beyond 64 KiB per stream is cut, and `truncated` says so. It is killed " +
			"after timeout_s seconds (default 180, at most 1800): start long-running servers as " +
			"background processes instead. The network is the sandbox's policy's: each connection " +
			"or lookup it refused while the command ran adds a `blocked_by_policy:` line to stderr " +
			"saying what and why; ask the user for that destination rather than trying others.",
		Schema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "command": {"type": "string", "minLength": 1, "description": "The command line, run by bash -c."},
    "cwd": {"type": "string", "description": "Working directory (default /home/user/workspace)."},
    "timeout_s": {"type": "integer", "minimum": 1, "maximum": 1800, "description": "Seconds before it is killed (default 180)."}
  },
  "required": ["command"],
  "additionalProperties": false
}`),
	},
	{
		Name: RunCode, Mutates: true,
		Description: "Run code in a stateful interpreter in the sandbox (a Jupyter kernel, like a " +
			"notebook): variables, imports, functions and the working directory persist from one " +
			"call to the next in the same context, by default one per language. Returns stdout, " +
			"stderr, the value of the last expression and what the code displayed (charts come " +
			"back as PNG images, tables as text), an error with its traceback, and the files the " +
			"code wrote under /home/user/workspace with URLs to download them. Code still running " +
			"at timeout_s is interrupted and the context keeps its state. Python runs in " +
			"/home/user/workspace; the python template has numpy, pandas and matplotlib (show a " +
			"figure with plt.show(), no backend needed).",
		Schema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "code": {"type": "string", "minLength": 1, "description": "The code to run, as a notebook cell."},
    "language": {"type": "string", "enum": ["python", "javascript", "typescript", "bash"], "description": "The language of the default context to run it in (default python)."},
    "context_id": {"type": "string", "description": "Run in this context (from POST /v1/sandboxes/{id}/contexts) instead of the language's default one."},
    "timeout_s": {"type": "integer", "minimum": 1, "maximum": 1800, "description": "Seconds before the code is interrupted (default 300)."}
  },
  "required": ["code"],
  "additionalProperties": false
}`),
	},
	{
		Name: DownloadURL,
		Description: "Make a URL from which a person (or a program) can download a file of the " +
			"sandbox, or a directory packed as tar.gz (the default) or zip, without any key, until " +
			"it expires (default 1 hour, at most 7 days). The URL is for that path only. Give it to " +
			"the user when they ask for a file the sandbox made.",
		Schema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "File or directory: absolute, or relative to /home/user/workspace."},
    "format": {"type": "string", "enum": ["tar.gz", "zip"], "description": "How a directory is packed (default tar.gz)."},
    "expires_in_s": {"type": "integer", "minimum": 1, "maximum": 604800, "description": "Seconds the URL works for (default 3600)."}
  },
  "required": ["path"],
  "additionalProperties": false
}`),
	},
	{
		Name: Checkpoint,
		Description: "Record the sandbox's files as they are now, in milliseconds, to compare with " +
			"(sandbox_diff) or go back to (sandbox_rollback) later: before a risky change (a " +
			"migration, an upgrade, a large refactor). Returns the checkpoint's id. A sandbox made " +
			"with checkpoints per tool call takes one before each tool call that changes " +
			"something, and that call's result names it as undo_checkpoint.",
		Schema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 200, "description": "What it is before (optional)."}
  },
  "additionalProperties": false
}`),
	},
	{
		Name: Diff,
		Description: "List the files added, changed and removed since a checkpoint, or, with path, " +
			"that file's unified diff from the checkpoint to now.",
		Schema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "checkpoint": {"type": "string", "description": "The checkpoint's id (c1, c2, …)."},
    "path": {"type": "string", "description": "A file: absolute, or relative to /home/user/workspace."}
  },
  "required": ["checkpoint"],
  "additionalProperties": false
}`),
	},
	{
		Name: Rollback,
		Description: "Go back to a checkpoint. scope \"call\" undoes one tool call: what changed " +
			"between its undo_checkpoint and the next checkpoint goes back as it was, every later " +
			"change stays, and nothing restarts. scope \"all\" (the default) brings every file " +
			"back to the checkpoint and restarts the sandbox (its background processes start " +
			"again).",
		Schema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "checkpoint": {"type": "string", "description": "The checkpoint's id (c1, c2, …): a tool call's undo_checkpoint to undo that call."},
    "scope": {"type": "string", "enum": ["call", "all"], "description": "call: undo the one tool call the checkpoint came before; all: everything since (default)."}
  },
  "required": ["checkpoint"],
  "additionalProperties": false
}`),
	},
	{
		Name: ComputerScreenshot,
		Description: "Take a screenshot of the sandbox's desktop (a Linux desktop with Xfce, Firefox " +
			"and Chromium; the sandbox must be made from template desktop, whose screen starts on " +
			"first use at 1024x768). Returns the picture and the screen's size. Coordinates of the " +
			"other computer tools are pixels of the full screen from its top left corner, also " +
			"when the picture is scaled down.",
		Schema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "region": {"type": "object", "description": "Only this part of the screen.", "properties": {"x": {"type": "integer", "minimum": 0}, "y": {"type": "integer", "minimum": 0}, "w": {"type": "integer", "minimum": 1}, "h": {"type": "integer", "minimum": 1}}, "required": ["x", "y", "w", "h"], "additionalProperties": false},
    "scale": {"type": "number", "exclusiveMinimum": 0, "maximum": 1, "description": "Shrink the picture by this factor (default 1)."}
  },
  "additionalProperties": false
}`),
	},
	computerAction(ComputerMove, "Move the mouse pointer to x, y.", `
    "x": {"type": "integer", "minimum": 0},
    "y": {"type": "integer", "minimum": 0}`, `"x", "y"`),
	computerAction(ComputerClick, "Click a mouse button at x, y (or where the pointer is): count 2 "+
		"double-clicks, 3 triple-clicks (a line of text).", `
    "x": {"type": "integer", "minimum": 0},
    "y": {"type": "integer", "minimum": 0},
    "button": {"type": "string", "enum": ["left", "middle", "right"], "description": "Default left."},
    "count": {"type": "integer", "minimum": 1, "maximum": 3, "description": "Clicks (default 1)."}`, ""),
	computerAction(ComputerDrag, "Press the left mouse button at the first point of path, move "+
		"through the others and release it at the last: select text, move a window, draw.", `
    "path": {"type": "array", "minItems": 2, "items": {"type": "object", "properties": {"x": {"type": "integer", "minimum": 0}, "y": {"type": "integer", "minimum": 0}}, "required": ["x", "y"], "additionalProperties": false}}`, `"path"`),
	computerAction(ComputerScroll, "Turn the mouse wheel at x, y (or where the pointer is).", `
    "x": {"type": "integer", "minimum": 0},
    "y": {"type": "integer", "minimum": 0},
    "direction": {"type": "string", "enum": ["up", "down", "left", "right"]},
    "amount": {"type": "integer", "minimum": 1, "maximum": 50, "description": "Clicks of the wheel (default 3)."}`, `"direction"`),
	computerAction(ComputerType, "Type text with the keyboard into what has the focus (click a "+
		"field first). Newlines press Return.", `
    "text": {"type": "string", "minLength": 1, "maxLength": 10000}`, `"text"`),
	computerAction(ComputerKey, "Press a key or a chord and release it: \"Return\", \"ctrl+a\", "+
		"\"alt+F4\", \"shift+Tab\", \"Page_Down\" (X key names; enter, esc, ctrl, cmd and the like "+
		"work too).", `
    "keys": {"type": "string", "minLength": 1}`, `"keys"`),
	computerAction(ComputerWait, "Wait, for a page or a program to show what it does.", `
    "ms": {"type": "integer", "minimum": 0, "maximum": 10000, "description": "Milliseconds."}`, `"ms"`),
	{
		Name:        ComputerCursor,
		Description: "Tell where the mouse pointer is on the sandbox's desktop, and the screen's size.",
		Schema:      json.RawMessage(`{"type": "object", "properties": {}, "additionalProperties": false}`),
	},
}

// computerAction is a computer tool that acts on the desktop: its
// properties (JSON, after the opening brace), and its required ones. Each
// may ask for a screenshot after it.
func computerAction(name, description, properties, required string) Tool {
	if required != "" {
		required = `,
  "required": [` + required + `]`
	}
	return Tool{
		Name: name, Mutates: true,
		Description: description + " Returns where the pointer is after it; with screenshot " +
			"true, a screenshot of the desktop too (to see what it did).",
		Schema: json.RawMessage(`{
  "type": "object",
  "properties": {` + properties + `,
    "screenshot": {"type": "boolean", "description": "Add a screenshot taken after the action."}
  }` + required + `,
  "additionalProperties": false
}`),
	}
}

// Lookup finds a tool of the catalogue by name.
func Lookup(name string) (Tool, bool) {
	for _, t := range Catalogue {
		if t.Name == name {
			return t, true
		}
	}
	return Tool{}, false
}
