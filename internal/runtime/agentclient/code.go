package agentclient

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"connectrpc.com/connect"

	"github.com/hutchdev/hutch/internal/agent/agentpb/hutchagent"
	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// CodeContext is a code context of the agent: a kernel that keeps the
// state of the code run in it.
type CodeContext struct {
	ID       string
	Language string // python, javascript, typescript or bash
	Cwd      string
	User     string
	Pid      uint32 // the kernel's
}

// NewContext is a context to create.
type NewContext struct {
	Language string
	Cwd      string
	User     string
	Env      map[string]string
	// ID, when set, is the context's id: the running context of that id
	// and language is returned instead of a new one.
	ID string
}

// CodeEvent is one thing code gave: exactly one field is set.
type CodeEvent struct {
	Stdout, Stderr string
	Result         *CodeResult
	Error          *CodeError
}

// CodeResult is an output of the kernel: the cell's value (Main) or
// something it displayed.
type CodeResult struct {
	// Data is the MIME bundle: MIME type to content.
	Data     map[string]json.RawMessage
	Metadata json.RawMessage
	Main     bool
}

// CodeError is the code's failure.
type CodeError struct {
	Name      string
	Value     string
	Traceback []string
}

// CodeEnd is how a call ended.
type CodeEnd struct {
	ExecutionCount int
	TimedOut       bool
	// Restarted: the kernel died or did not stop at the timeout, and a new
	// one took its place: the context's state is gone.
	Restarted bool
	// Files are the absolute paths of the files written under the
	// context's working directory during the call (RunCode's listFiles).
	Files          []string
	FilesTruncated bool
}

// CreateContext starts a code context. A language the sandbox lacks the
// kernel of is FailedPrecondition.
func (c *Client) CreateContext(ctx context.Context, req NewContext) (CodeContext, error) {
	res, err := c.agent.CreateContext(ctx, connect.NewRequest(&hutchagent.CreateContextRequest{
		Language: req.Language, Cwd: req.Cwd, User: req.User, Env: req.Env, Id: req.ID,
	}))
	if err != nil {
		return CodeContext{}, err
	}
	return codeContext(res.Msg), nil
}

// Contexts lists the agent's code contexts, by id.
func (c *Client) Contexts(ctx context.Context) ([]CodeContext, error) {
	res, err := c.agent.ListContexts(ctx, connect.NewRequest(&hutchagent.ListContextsRequest{}))
	if err != nil {
		return nil, err
	}
	out := make([]CodeContext, 0, len(res.Msg.GetContexts()))
	for _, m := range res.Msg.GetContexts() {
		out = append(out, codeContext(m))
	}
	return out, nil
}

// RestartContext gives context id a new kernel.
func (c *Client) RestartContext(ctx context.Context, id string) (CodeContext, error) {
	res, err := c.agent.RestartContext(ctx, connect.NewRequest(&hutchagent.ContextRequest{Id: id}))
	if err != nil {
		return CodeContext{}, err
	}
	return codeContext(res.Msg), nil
}

// DeleteContext ends context id and its kernel.
func (c *Client) DeleteContext(ctx context.Context, id string) error {
	_, err := c.agent.DeleteContext(ctx, connect.NewRequest(&hutchagent.ContextRequest{Id: id}))
	return err
}

// RunCode runs code in context id, handing fn each thing it gives as it
// comes, and returns how the call ended. A timeout (when not 0)
// interrupts the code; listFiles asks for the files it wrote.
func (c *Client) RunCode(ctx context.Context, id, code string, timeout time.Duration, listFiles bool, fn func(CodeEvent) error) (CodeEnd, error) {
	req := &hutchagent.RunCodeRequest{ContextId: id, Code: code, ListFiles: listFiles}
	if timeout > 0 {
		req.TimeoutMs = millis(timeout)
	}
	stream, err := c.agent.RunCode(ctx, connect.NewRequest(req))
	if err != nil {
		return CodeEnd{}, err
	}
	defer func() { _ = stream.Close() }()
	for stream.Receive() {
		var ev CodeEvent
		switch e := stream.Msg().GetEvent().(type) {
		case *hutchagent.CodeEvent_Stdout:
			ev.Stdout = e.Stdout
		case *hutchagent.CodeEvent_Stderr:
			ev.Stderr = e.Stderr
		case *hutchagent.CodeEvent_Result:
			r := &CodeResult{Metadata: e.Result.GetMetadata(), Main: e.Result.GetIsMainResult()}
			if err := json.Unmarshal(e.Result.GetData(), &r.Data); err != nil {
				return CodeEnd{}, fmt.Errorf("the agent sent a result that is not a MIME bundle: %w", err)
			}
			ev.Result = r
		case *hutchagent.CodeEvent_Error:
			ev.Error = &CodeError{Name: e.Error.GetName(), Value: e.Error.GetValue(), Traceback: e.Error.GetTraceback()}
		case *hutchagent.CodeEvent_End:
			x := e.End
			return CodeEnd{
				ExecutionCount: int(x.GetExecutionCount()), TimedOut: x.GetTimedOut(), Restarted: x.GetRestarted(),
				Files: x.GetFiles(), FilesTruncated: x.GetFilesTruncated(),
			}, nil
		default:
			continue
		}
		if err := fn(ev); err != nil {
			return CodeEnd{}, err
		}
	}
	if err := stream.Err(); err != nil {
		return CodeEnd{}, err
	}
	return CodeEnd{}, errdefs.Unavailable("agent unavailable: it ended the code's stream before its end")
}

func codeContext(m *hutchagent.CodeContext) CodeContext {
	return CodeContext{ID: m.GetId(), Language: m.GetLanguage(), Cwd: m.GetCwd(), User: m.GetUser(), Pid: m.GetPid()}
}
