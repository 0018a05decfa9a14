package toolrun

import (
	"context"
	"encoding/json"
	"errors"
	"path"

	"github.com/hutchdev/hutch/internal/agent/tools"
	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core"
	"github.com/hutchdev/hutch/internal/core/checkpoints"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// Checkpoints is what the checkpoint tools, and the checkpoints taken per
// tool call, need of the checkpoints service (*checkpoints.Service).
type Checkpoints interface {
	CreateIn(ctx context.Context, sb *core.Running, req checkpoints.Request) (checkpoints.Checkpoint, error)
	Create(ctx context.Context, id string, req checkpoints.Request) (checkpoints.Checkpoint, error)
	Diff(ctx context.Context, id, c string) ([]checkpoints.Change, bool, error)
	FileDiff(ctx context.Context, id, c, path string) (string, error)
	Undo(ctx context.Context, id, c string) (checkpoints.Undone, error)
	Rollback(ctx context.Context, id, c string, memory bool) (*store.Sandbox, error)
}

// isCheckpointTool says the tool is one of the checkpoint tools, which
// the daemon runs without holding the sandbox (a rollback restarts it).
func isCheckpointTool(name string) bool {
	return name == tools.Checkpoint || name == tools.Diff || name == tools.Rollback
}

// checkpointTool runs sandbox_checkpoint, sandbox_diff or
// sandbox_rollback.
func (s *Service) checkpointTool(ctx context.Context, id string, call Call) (Outcome, error) {
	if s.checkpoints == nil {
		return toolFailure(tools.KindFailed, "this daemon keeps no checkpoints"), nil
	}
	var a struct {
		Name       string `json:"name"`
		Checkpoint string `json:"checkpoint"`
		Path       string `json:"path"`
		Scope      string `json:"scope"`
	}
	var failed *tools.Error
	if errors.As(tools.DecodeArgs(call.Args, &a), &failed) {
		return Outcome{Error: failed}, nil
	}
	var result any
	var err error
	switch call.Name {
	case tools.Checkpoint:
		var c checkpoints.Checkpoint
		if c, err = s.checkpoints.Create(ctx, id, checkpoints.Request{Name: a.Name}); err == nil {
			result = map[string]string{"checkpoint": c.ID}
		}
	case tools.Diff:
		if a.Path != "" {
			p := a.Path
			if !path.IsAbs(p) {
				p = path.Join(rootfs.Workspace, p)
			}
			var unified string
			if unified, err = s.checkpoints.FileDiff(ctx, id, a.Checkpoint, p); err == nil {
				result = map[string]any{"checkpoint": a.Checkpoint, "path": p, "unified": unified, "same": unified == ""}
			}
			break
		}
		var changes []checkpoints.Change
		var truncated bool
		if changes, truncated, err = s.checkpoints.Diff(ctx, id, a.Checkpoint); err == nil {
			result = map[string]any{"checkpoint": a.Checkpoint, "changes": changes, "truncated": truncated}
		}
	case tools.Rollback:
		switch a.Scope {
		case "call":
			var undone checkpoints.Undone
			if undone, err = s.checkpoints.Undo(ctx, id, a.Checkpoint); err == nil {
				var paths []string
				for _, c := range undone.Changes {
					paths = append(paths, c.Path)
				}
				result = map[string]any{"checkpoint": a.Checkpoint, "undone": paths}
			}
		case "", "all":
			var sb *store.Sandbox
			if sb, err = s.checkpoints.Rollback(ctx, id, a.Checkpoint, false); err == nil {
				result = map[string]any{"checkpoint": a.Checkpoint, "state": sb.State, "restarted": true}
			}
		default:
			return toolFailure(tools.KindInvalidArgument, "scope must be call or all, got %q", a.Scope), nil
		}
	}
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		return toolFailure(tools.KindNotFound, "%v", err), nil
	case errors.Is(err, errdefs.ErrInvalidArgument), errors.Is(err, errdefs.ErrFailedPrecondition), errors.Is(err, errdefs.ErrConflict):
		return toolFailure(tools.KindFailed, "%v", err), nil
	case err != nil:
		return Outcome{}, err
	}
	b, err := json.Marshal(result)
	return Outcome{Result: b}, err
}

// checkpointFirst takes the checkpoint a tool call that changes files gets
// in a sandbox made with checkpoints per tool call; "" when it gets none.
func (s *Service) checkpointFirst(ctx context.Context, r *core.Running, tool tools.Tool) (string, error) {
	if !tool.Mutates || s.checkpoints == nil {
		return "", nil
	}
	rec, err := s.sandboxes.Get(ctx, r.ID())
	if err != nil || rec.Checkpoints != store.CheckpointsPerToolCall {
		return "", err
	}
	c, err := s.checkpoints.CreateIn(ctx, r, checkpoints.Request{Note: "before " + tool.Name})
	return c.ID, err
}

// withUndo adds the checkpoint that undoes the call to its result, a JSON
// object, where a model reads it.
func withUndo(o Outcome, c string) Outcome {
	o.Checkpoint = c
	if c == "" {
		return o
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(o.Result, &obj) != nil || obj == nil {
		obj = map[string]json.RawMessage{}
		if len(o.Result) > 0 {
			obj["result"] = o.Result
		}
	}
	obj["undo_checkpoint"], _ = json.Marshal(c)
	if b, err := json.Marshal(obj); err == nil {
		o.Result = b
	}
	return o
}
