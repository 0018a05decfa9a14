package core

import "maps"

// withEnv is the sandbox's environment with a command's own over it.
func withEnv(sandbox, command map[string]string) map[string]string {
	if len(sandbox) == 0 {
		return command
	}
	env := maps.Clone(sandbox)
	maps.Copy(env, command)
	return env
}
