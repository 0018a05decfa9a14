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

// Threads is the room for the agent's threads in a sandbox's pids limit.
// The Go runtime ends its process when it cannot make a thread it needs:
// a workload holding the sandbox's limit must not keep the agent from
// making one (see the agent's guardThreads). A runtime whose pids cgroup
// counts the agent's threads (runc) adds Threads to its limit, and either
// gives the sandbox's processes a child cgroup of their own with the
// limit they asked for (--tasks-fd, cgroup v1), or has the agent make
// Threads threads up front. A runtime whose limit is RLIMIT_NPROC (gVisor)
// instead gives the agent CAP_SYS_RESOURCE, which exempts it
// (--nproc-exempt).
const Threads = 12

// OneProcessor is the variable a runtime sets (to 1) in the agent's
// environment beside GOMAXPROCS=1 when the sandbox's own environment does
// not set GOMAXPROCS: the Go runtime then starts the agent on the one
// processor it runs on, instead of on one per CPU that the agent's Main
// drops again (a stop of the world, threads made to idle), which was 13%
// of the agent's start here. The agent keeps both out of the environment
// of everything it starts: a sandbox's processes see GOMAXPROCS only where
// the sandbox's environment sets it.
const OneProcessor = "HUTCH_AGENT_ONE_PROCESSOR"

// Tunnels: the daemon reaches a TCP port on the sandbox's loopback through
// the agent, which is how previews work whatever the sandbox's network
// (mode none has nothing but lo) and under either runtime. The daemon sends
//
//	GET TunnelPath?port=N HTTP/1.1
//	Connection: Upgrade
//	Upgrade: TunnelProtocol
//
// and the agent dials 127.0.0.1:N inside the sandbox (or [::1]:N, where a
// server listening on "localhost" may be). When nothing listens there it
// answers its HTTP error ({"code":"failed_precondition",…}); otherwise 101
// Switching Protocols, after which the connection carries the TCP stream's
// bytes both ways. Each side's end of writing (a half-close) is passed on;
// the tunnel ends when both directions have.
const (
	TunnelPath     = "/tunnel"
	TunnelProtocol = "hutch-tcp"
)
