package toolrun

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/hutchdev/hutch/internal/agent/tools"
	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core/desktop"
)

// Desktops is what the computer tools need of the desktops service
// (*desktop.Service).
type Desktops interface {
	Start(ctx context.Context, id string, size desktop.Size) (desktop.Status, error)
	Status(ctx context.Context, id string) (desktop.Status, error)
	Screenshot(ctx context.Context, id string, shot desktop.Shot) ([]byte, error)
	Act(ctx context.Context, id string, actions []desktop.Action, shot *desktop.Shot) (desktop.Result, error)
}

// computerArgs are the arguments of every computer tool.
type computerArgs struct {
	X          *int            `json:"x"`
	Y          *int            `json:"y"`
	Button     string          `json:"button"`
	Count      int             `json:"count"`
	Path       []desktop.Point `json:"path"`
	Direction  string          `json:"direction"`
	Amount     int             `json:"amount"`
	Text       string          `json:"text"`
	Keys       string          `json:"keys"`
	Ms         *int            `json:"ms"`
	Screenshot bool            `json:"screenshot"`
	Region     *struct {
		X int `json:"x"`
		Y int `json:"y"`
		W int `json:"w"`
		H int `json:"h"`
	} `json:"region"`
	Scale float64 `json:"scale"`
}

// action is the desktop action a computer tool's call stands for.
func (a computerArgs) action(name string) (desktop.Action, error) {
	act := desktop.Action{X: a.X, Y: a.Y, Button: a.Button}
	switch name {
	case tools.ComputerMove:
		act.Type = desktop.Move
	case tools.ComputerClick:
		switch a.Count {
		case 0, 1:
			act.Type = desktop.Click
		case 2:
			act.Type = desktop.DoubleClick
		case 3:
			act.Type = desktop.TripleClick
		default:
			return act, errdefs.InvalidArgument("count is 1, 2 or 3; got %d", a.Count)
		}
	case tools.ComputerDrag:
		act.Type, act.Path = desktop.Drag, a.Path
	case tools.ComputerScroll:
		act.Type, act.Direction, act.Amount = desktop.Scroll, a.Direction, a.Amount
	case tools.ComputerType:
		act.Type, act.Text = desktop.Type, a.Text
	case tools.ComputerKey:
		act.Type, act.Keys = desktop.Key, a.Keys
	case tools.ComputerWait:
		if a.Ms == nil {
			return act, errdefs.InvalidArgument("ms is required")
		}
		act.Type, act.Ms = desktop.Wait, *a.Ms
	}
	return act, nil
}

// computerTool runs a computer tool on sandbox id's desktop, starting the
// desktop first when it does not run: an agent's first screenshot shows
// it.
func (s *Service) computerTool(ctx context.Context, id string, call Call) (Outcome, error) {
	if s.desktops == nil {
		return toolFailure(tools.KindFailed, "this daemon drives no desktops"), nil
	}
	var a computerArgs
	var failed *tools.Error
	if errors.As(tools.DecodeArgs(call.Args, &a), &failed) {
		return Outcome{Error: failed}, nil
	}
	outcome, err := s.onDesktop(ctx, id, call.Name, a)
	if errors.Is(err, desktop.ErrNotRunning) {
		if _, err = s.desktops.Start(ctx, id, desktop.Size{}); err == nil {
			outcome, err = s.onDesktop(ctx, id, call.Name, a)
		}
	}
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		return toolFailure(tools.KindNotFound, "%v", err), nil
	case errors.Is(err, errdefs.ErrInvalidArgument):
		return toolFailure(tools.KindInvalidArgument, "%v", err), nil
	case errors.Is(err, errdefs.ErrFailedPrecondition), errors.Is(err, errdefs.ErrConflict):
		return toolFailure(tools.KindFailed, "%v", err), nil
	}
	return outcome, err
}

func (s *Service) onDesktop(ctx context.Context, id, name string, a computerArgs) (Outcome, error) {
	var result any
	var png []byte
	switch name {
	case tools.ComputerScreenshot, tools.ComputerCursor:
		st, err := s.desktops.Status(ctx, id)
		if err != nil {
			return Outcome{}, err
		}
		if !st.Running {
			return Outcome{}, desktop.ErrNotRunning
		}
		result = map[string]any{"width": st.Size.Width, "height": st.Size.Height, "cursor": st.Cursor}
		if name == tools.ComputerScreenshot {
			shot := desktop.Shot{Scale: a.Scale}
			if r := a.Region; r != nil {
				shot.Region = &desktop.Rect{X: r.X, Y: r.Y, Width: r.W, Height: r.H}
			}
			if png, err = s.desktops.Screenshot(ctx, id, shot); err != nil {
				return Outcome{}, err
			}
		}
	default:
		act, err := a.action(name)
		if err != nil {
			return Outcome{}, err
		}
		var shot *desktop.Shot
		if a.Screenshot {
			shot = &desktop.Shot{}
		}
		res, err := s.desktops.Act(ctx, id, []desktop.Action{act}, shot)
		if err != nil {
			return Outcome{}, err
		}
		result, png = map[string]any{"cursor": res.Cursor}, res.Screenshot
	}
	b, err := json.Marshal(result)
	out := Outcome{Result: b}
	if png != nil {
		out.Images = []Image{{MIMEType: "image/png", Data: png}}
	}
	return out, err
}
