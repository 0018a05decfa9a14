package agent

import (
	"context"
	"net/http"
	"sync"

	"connectrpc.com/connect"

	"github.com/hutchdev/hutch/internal/agent/agentpb/hutchagent/hutchagentconnect"
)

// A procedure is one method of a Connect service, its handler made at its
// first call.
//
// The generated NewAgentHandler makes a handler for each of the Agent
// service's twelve methods, for each of three protocols: 0.27 ms of a
// fresh agent's CPU here, where building Start's alone took 0.03 ms. An
// agent starts in every sandbox, and most are asked one method (Start)
// before they are deleted.
type procedure struct {
	path  string
	build func() http.Handler
}

// unary and serverStream are the procedures of a method of those kinds.
func unary[Req, Res any](path string, method func(context.Context, *connect.Request[Req]) (*connect.Response[Res], error)) procedure {
	return procedure{path, func() http.Handler { return connect.NewUnaryHandler(path, method) }}
}

func serverStream[Req, Res any](path string, method func(context.Context, *connect.Request[Req], *connect.ServerStream[Res]) error) procedure {
	return procedure{path, func() http.Handler { return connect.NewServerStreamHandler(path, method) }}
}

// byProcedure serves each of procs at its path, its handler made at its
// first call; any other path is not found, as with a generated handler.
func byProcedure(procs ...procedure) http.Handler {
	handlers := make(map[string]func() http.Handler, len(procs))
	for _, p := range procs {
		handlers[p.path] = sync.OnceValue(p.build)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, ok := handlers[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		h().ServeHTTP(w, r)
	})
}

// agentProcedures are the Agent service's methods; TestAgentProcedures
// checks that they are all of the service's.
func agentProcedures(a *agentService) []procedure {
	return []procedure{
		unary(hutchagentconnect.AgentHealthProcedure, a.Health),
		serverStream(hutchagentconnect.AgentStartProcedure, a.Start),
		serverStream(hutchagentconnect.AgentReplayProcedure, a.Replay),
		unary(hutchagentconnect.AgentSignalProcedure, a.Signal),
		unary(hutchagentconnect.AgentReclaimMemoryProcedure, a.ReclaimMemory),
		unary(hutchagentconnect.AgentRunToolProcedure, a.RunTool),
		serverStream(hutchagentconnect.AgentArchiveProcedure, a.Archive),
		unary(hutchagentconnect.AgentCreateContextProcedure, a.CreateContext),
		unary(hutchagentconnect.AgentListContextsProcedure, a.ListContexts),
		unary(hutchagentconnect.AgentRestartContextProcedure, a.RestartContext),
		unary(hutchagentconnect.AgentDeleteContextProcedure, a.DeleteContext),
		serverStream(hutchagentconnect.AgentRunCodeProcedure, a.RunCode),
	}
}
