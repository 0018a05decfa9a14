package exec

import (
	"context"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core"
	"github.com/hutchdev/hutch/internal/runtime/agentclient"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
)

// Code contexts: kernels in the sandbox that keep the state of the code
// run in them from one call to the next (the agent's kernel.go). They live
// in the agent, so they last as long as the sandbox's processes do: a
// pause or a suspend with memory (gVisor) keeps them, a suspend without
// memory (runc) ends them.

// Bounds of a call in a context.
const (
	DefaultCodeTimeout = 5 * time.Minute
	MaxCodeTimeout     = 30 * time.Minute
)

// Context is a code context.
type Context struct {
	ID       string
	Language string // python, javascript, typescript or bash
	Cwd      string
	User     string
}

// What code in a context gives is the agent client's types, one of each
// from the agent to the fronts: named here for the fronts, which know no
// runtime package.
type (
	// CodeEvent is one thing code gave: exactly one field is set.
	CodeEvent = agentclient.CodeEvent
	// CodeResult is a kernel's output: the cell's value (Main) or
	// something it displayed.
	CodeResult = agentclient.CodeResult
	// CodeError is the code's failure.
	CodeError = agentclient.CodeError
	// CodeEnd is how a call in a context ended.
	CodeEnd = agentclient.CodeEnd
)

// ContextRequest is a code context to create.
type ContextRequest struct {
	Language string
	Cwd      string // default: the workspace
	Env      map[string]string
	User     string // the Linux user the kernel runs as; default: the sandbox user
	ForUser  string // the product's user it runs for (see Request)
	// ID, when set, names the context: the running one of that id and
	// language is returned instead of a new one.
	ID string
}

// ContextCode is code to run in a context.
type ContextCode struct {
	ContextID string
	Code      string
	Timeout   time.Duration // default DefaultCodeTimeout
	// ListFiles asks for the files the code wrote under the context's
	// working directory.
	ListFiles bool
}

// CreateContext starts a code context in sandbox id, its kernel given the
// environment a command would get (the sandbox's, its secrets, req.Env).
func (s *Service) CreateContext(ctx context.Context, id string, req ContextRequest) (Context, error) {
	cwd := contextDir(req.Cwd)
	var out Context
	err := s.withAgent(ctx, id, func(r *core.Running) error {
		env, err := r.CommandEnv(ctx, req.ForUser, req.Env)
		if err != nil {
			return err
		}
		c, err := r.Agent().CreateContext(ctx, agentclient.NewContext{
			Language: req.Language, Cwd: cwd, User: rootfs.UserOr(req.User), Env: env, ID: req.ID,
		})
		out = contextOf(c)
		return err
	})
	return out, err
}

// Contexts lists sandbox id's code contexts.
func (s *Service) Contexts(ctx context.Context, id string) ([]Context, error) {
	var out []Context
	err := s.withAgent(ctx, id, func(r *core.Running) error {
		cs, err := r.Agent().Contexts(ctx)
		for _, c := range cs {
			out = append(out, contextOf(c))
		}
		return err
	})
	return out, err
}

// RestartContext gives a context a new kernel: its state is gone.
func (s *Service) RestartContext(ctx context.Context, id, contextID string) (Context, error) {
	var out Context
	err := s.withAgent(ctx, id, func(r *core.Running) error {
		c, err := r.Agent().RestartContext(ctx, contextID)
		out = contextOf(c)
		return err
	})
	return out, err
}

// DeleteContext ends a context and its kernel.
func (s *Service) DeleteContext(ctx context.Context, id, contextID string) error {
	return s.withAgent(ctx, id, func(r *core.Running) error {
		return r.Agent().DeleteContext(ctx, contextID)
	})
}

// RunInContext runs code in one of sandbox id's contexts, handing fn what
// it gives as it comes.
func (s *Service) RunInContext(ctx context.Context, id string, req ContextCode, fn func(CodeEvent) error) (CodeEnd, error) {
	timeout := req.Timeout
	switch {
	case timeout == 0:
		timeout = DefaultCodeTimeout
	case timeout < 0 || timeout > MaxCodeTimeout:
		return CodeEnd{}, errdefs.InvalidArgument("timeout must be between 1 s and %s, got %s", MaxCodeTimeout, timeout)
	}
	var end CodeEnd
	err := s.withAgent(ctx, id, func(r *core.Running) error {
		var err error
		end, err = r.Agent().RunCode(ctx, req.ContextID, req.Code, timeout, req.ListFiles, fn)
		return err
	})
	return end, err
}

func contextOf(c agentclient.CodeContext) Context {
	return Context{ID: c.ID, Language: c.Language, Cwd: c.Cwd, User: c.User}
}

// withAgent runs fn with sandbox id held running; an agent that went away
// under it is the sandbox's error (see core.Running.Err).
func (s *Service) withAgent(ctx context.Context, id string, fn func(r *core.Running) error) error {
	r, release, err := s.core.Acquire(ctx, id)
	if err != nil {
		return err
	}
	defer release()
	if err := fn(r); err != nil {
		return r.Err(ctx, err)
	}
	return nil
}

// contextDir is where a context runs: cwd, relative to the workspace, or
// the workspace.
func contextDir(cwd string) string {
	if cwd == "" {
		return rootfs.WorkspacePath(".")
	}
	return rootfs.WorkspacePath(cwd)
}
