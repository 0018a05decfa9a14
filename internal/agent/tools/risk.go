package tools

import (
	"encoding/json"
	"path"
	"regexp"
	"strings"
	"sync"
)

// Sandbox modes, for hosts that embed Hutch as their agent's executor.
const (
	// ModeAll runs every call in the sandbox (the default).
	ModeAll = "all"
	// ModeSelective runs the risky calls (Risky) in the sandbox and the
	// rest on the host.
	ModeSelective = "selective"
	// ModeOff runs every call on the host: trusted local development only.
	ModeOff = "off"
)

// ModeAllows says whether a caller whose least isolated mode is floor may
// ask for mode: all is the most isolated, then selective, then off.
func ModeAllows(floor, mode string) bool {
	rank := map[string]int{ModeOff: 0, ModeSelective: 1, ModeAll: 2}
	f, ok1 := rank[floor]
	m, ok2 := rank[mode]
	return ok1 && ok2 && m >= f
}

// ValidMode says whether mode is one of the three.
func ValidMode(mode string) bool { return mode == ModeAll || mode == ModeSelective || mode == ModeOff }

// The rules of selective mode. A call is risky when it:
//
//   - reaches the network: a command naming curl, wget, ssh, scp, sftp,
//     rsync, nc, telnet, ftp, ping, dig or nslookup, a git command that
//     talks to a remote (clone, fetch, pull, push, submodule, ls-remote),
//     a URL, or bash's /dev/tcp;
//   - installs packages: pip, uv, npm, yarn, pnpm, bun, apt, apt-get, dpkg
//     -i, gem, cargo, go install or get, brew, conda, poetry;
//   - runs a script from outside: what the network rule catches, and eval
//     or source of a command's output;
//   - gains privileges: sudo, su, doas;
//   - reaches outside the workspace: a file tool's path out of it (.. or
//     an absolute path elsewhere), reading as much as writing, or a
//     command that redirects into, or copies, moves, removes, links,
//     touches, makes or changes an absolute path, ~ or .. out of it.
//
// Reading in the workspace (sandbox_read_file, _list_directory,
// _grep_files, _find_files) is not risky; what it reads out of it, the
// host's files, is the sandbox's to answer. These rules choose where a
// call runs; they are not what confines it: on the host a file tool
// reaches nothing out of the workspace, whatever its path says
// (Files.Confined), and a command runs as an unprivileged user.
// sandbox_download_url always runs in the sandbox.
//
// The patterns are compiled on first use: the agent, the same binary,
// links this package and never classifies a command.
var (
	networkWords = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(^|[\s;&|(\x60$])(curl|wget|ssh|scp|sftp|rsync|nc|ncat|netcat|telnet|ftp|ping|dig|nslookup)(\s|$)|\bgit\s+(clone|fetch|pull|push|submodule|ls-remote)\b|\w+://|/dev/(tcp|udp)/`)
	})
	installWords = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(^|[\s;&|(])((pip3?|python3?\s+-m\s+pip|uv\s+pip|conda|gem|brew)\s+install|(uv|poetry|yarn|pnpm|bun|cargo)\s+(add|install|i)\b|npm\s+(install|i|ci|add)\b|apt(-get)?\s+(-\S+\s+)*install|dpkg\s+-i|go\s+(install|get)\b)`)
	})
	outsideScript = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(^|[\s;&|])(eval|source|\.)\s+["']?\$\(|<\(`) })
	privilege     = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(^|[\s;&|(])(sudo|su|doas)(\s|$)`) })
	writeCommand  = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(^|[\s;&|(])(cp|mv|rm|ln|touch|mkdir|rmdir|chmod|chown|tee|dd|install|truncate|sed\s+-i)\s`)
	})
	pathWord = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(^|[\s=<>'"])((/|~|\.\./)[^\s;&|'"<>)]*)`) })
	redirect = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`>>?\s*((/|~|\.\./)[^\s;&|'"<>)]*)`) })
)

// Risky says whether a call of tool name with args goes to the sandbox in
// selective mode, and why; workspace is where relative paths are.
func Risky(name string, args json.RawMessage, workspace string) (bool, string) {
	var a struct {
		Path    string `json:"path"`
		Patch   string `json:"patch"`
		Command string `json:"command"`
		Cwd     string `json:"cwd"`
	}
	_ = json.Unmarshal(args, &a) // bad arguments are the tool's to refuse
	switch name {
	case ReadFile, ListDirectory, GrepFiles, FindFiles:
		if a.Path != "" && !inside(a.Path, workspace) {
			return true, "it reads outside the workspace: " + a.Path
		}
		return false, ""
	case WriteFile, FindReplace, DeleteFile:
		if !inside(a.Path, workspace) {
			return true, "it writes outside the workspace: " + a.Path
		}
		return false, ""
	case ApplyPatch:
		changes, err := parsePatch(a.Patch)
		if err != nil {
			return false, ""
		}
		for _, c := range changes {
			for _, p := range []string{c.path, c.moveTo} {
				if p != "" && !inside(p, workspace) {
					return true, "it writes outside the workspace: " + p
				}
			}
		}
		return false, ""
	case RunCommand:
		return riskyCommand(a.Command, a.Cwd, workspace)
	}
	return true, "only the sandbox runs " + name
}

func riskyCommand(cmd, cwd, workspace string) (bool, string) {
	switch {
	case networkWords().MatchString(cmd):
		return true, "it reaches the network: " + networkWords().FindString(cmd)
	case installWords().MatchString(cmd):
		return true, "it installs packages: " + strings.TrimSpace(installWords().FindString(cmd))
	case outsideScript().MatchString(cmd):
		return true, "it runs a script made at run time"
	case privilege().MatchString(cmd):
		return true, "it asks for privileges"
	case cwd != "" && !inside(cwd, workspace):
		return true, "it runs outside the workspace: " + cwd
	}
	for _, m := range redirect().FindAllStringSubmatch(cmd, -1) {
		if !inside(m[1], workspace) {
			return true, "it writes outside the workspace: " + m[1]
		}
	}
	if writeCommand().MatchString(cmd) {
		for _, m := range pathWord().FindAllStringSubmatch(cmd, -1) {
			if !inside(m[2], workspace) {
				return true, "it changes files outside the workspace: " + m[2]
			}
		}
	}
	return false, ""
}

// inside says whether p (relative paths in workspace) stays in workspace.
// ~ is taken as outside: it names a home, wherever that is.
func inside(p, workspace string) bool {
	if strings.HasPrefix(p, "~") {
		return false
	}
	if p == "/dev/null" {
		return true // nothing is written
	}
	if !path.IsAbs(p) {
		p = path.Join(workspace, p)
	}
	p = path.Clean(p)
	return p == workspace || strings.HasPrefix(p, workspace+"/")
}
