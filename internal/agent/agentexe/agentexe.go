// Package agentexe carries the in-sandbox agent's own executable inside
// hutch. make build (and the tests' and benchmarks' builds) build
// cmd/hutch-agent into embed/ first, then hutch, which embeds it: one file
// to ship, and every sandbox runs a 7 MB agent that imports only the agent's
// code instead of the whole 44 MB hutch, whose package initialisation alone
// (313 inits) cost each sandbox's start ~6 ms.
package agentexe

import (
	"embed"
	"io/fs"
)

//go:embed embed
var files embed.FS

// name is the executable's name in embed/ (see the Makefile's build).
const name = "embed/hutch-agent"

// Executable returns the agent's executable, or nil when this hutch was
// built without it (go build ./cmd/hutch, not make build): the daemon then
// runs itself as the agent, as `hutch agent`.
func Executable() []byte {
	b, err := fs.ReadFile(files, name)
	if err != nil {
		return nil
	}
	return b
}
