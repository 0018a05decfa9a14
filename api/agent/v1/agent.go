// Package agentv1 holds what the agent protocol hutch.agent.v1 (agent.proto,
// beside this file) says outside its RPCs, for every side to share: the
// agent serves them, the daemon's runtimes send them. It imports nothing,
// so that a runtime, which knows nothing of the agent's code, may use it.
// The protocol's generated code is internal/agent/agentpb/hutchagent.
package agentv1

// Signals that close and reopen the listener of an agent that listens on a
// socket path itself (under gVisor), sent to the agent (PID 1) through the
// runtime (`runsc kill`), in the names the runtimes take. A gVisor
// checkpoint cannot save a socket listening on a host path, so the daemon
// has the agent close it first (SignalUnlisten) and make it again once the
// sandbox is restored (SignalRelisten). Connections and everything else go
// on meanwhile.
const (
	SignalUnlisten = "USR1"
	SignalRelisten = "USR2"
)

// Threads is how many threads the agent starts up front (see the agent's
// reserveThreads). A sandbox's processes share its pids limit with the
// agent's threads, and the Go runtime ends its process when it cannot make
// a thread it needs: without threads made in advance, a workload holding
// the limit would end the agent, and the sandbox with it. A runtime whose
// pids limit counts the agent's threads (runc) adds Threads to it, so the
// sandbox's own processes get the limit they asked for.
const Threads = 12
