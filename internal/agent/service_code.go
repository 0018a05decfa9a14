package agent

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	"github.com/hutchdev/hutch/internal/agent/agentpb/hutchagent"
)

// The code contexts' calls of agentService (kernel.go).

func (a *agentService) CreateContext(_ context.Context, req *connect.Request[hutchagent.CreateContextRequest]) (*connect.Response[hutchagent.CodeContext], error) {
	c, err := a.srv.contexts.create(req.Msg)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(c), nil
}

func (a *agentService) ListContexts(context.Context, *connect.Request[hutchagent.ListContextsRequest]) (*connect.Response[hutchagent.ListContextsResponse], error) {
	return connect.NewResponse(&hutchagent.ListContextsResponse{Contexts: a.srv.contexts.list()}), nil
}

func (a *agentService) RestartContext(ctx context.Context, req *connect.Request[hutchagent.ContextRequest]) (*connect.Response[hutchagent.CodeContext], error) {
	c, err := a.srv.contexts.restart(ctx, req.Msg.GetId())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(c), nil
}

func (a *agentService) DeleteContext(_ context.Context, req *connect.Request[hutchagent.ContextRequest]) (*connect.Response[hutchagent.DeleteContextResponse], error) {
	if err := a.srv.contexts.remove(req.Msg.GetId()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&hutchagent.DeleteContextResponse{}), nil
}

// RunCode streams the code's events, with keepalives while the code is
// silent.
func (a *agentService) RunCode(ctx context.Context, req *connect.Request[hutchagent.RunCodeRequest], stream *connect.ServerStream[hutchagent.CodeEvent]) error {
	if req.Msg.GetContextId() == "" {
		return connect.NewError(connect.CodeInvalidArgument, errors.New("context_id is required"))
	}
	s := &eventSender{send: stream.Send, sent: make(chan struct{}, 1)}
	stop := make(chan struct{})
	defer close(stop)
	go s.keepAlive(a.srv.cfg.KeepAlive, stop)
	return a.srv.contexts.run(ctx, req.Msg, s.Send)
}
