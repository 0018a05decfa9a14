package toolrun

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hutchdev/hutch/internal/agent/tools"
	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core"
	"github.com/hutchdev/hutch/internal/runtime/agentclient"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
)

// sandbox_run_code: code in a code context of the sandbox (a Jupyter
// kernel, see internal/core/exec/contexts.go), stateful from call to call. A
// call that names no context uses its language's default one, made on
// first use. Images the code shows (matplotlib's figures) come back beside
// the result, for MCP's image content, not inside the JSON a model reads
// as text.

// defaultCodeToolTimeout is sandbox_run_code's timeout when the call gives
// none.
const defaultCodeToolTimeout = 300 * time.Second

type runCodeArgs struct {
	Code      string `json:"code"`
	Language  string `json:"language"`
	ContextID string `json:"context_id"`
	TimeoutS  int    `json:"timeout_s"`
}

// runCodeResult is what sandbox_run_code returns.
type runCodeResult struct {
	ContextID      string           `json:"context_id"`
	Stdout         string           `json:"stdout"`
	Stderr         string           `json:"stderr"`
	Results        []codeToolResult `json:"results,omitempty"`
	Error          *codeToolError   `json:"error,omitempty"`
	Files          []codeToolFile   `json:"files,omitempty"`
	ExecutionCount int              `json:"execution_count,omitempty"`
	TimedOut       bool             `json:"timed_out,omitempty"`
	Restarted      bool             `json:"restarted,omitempty"`
	Truncated      bool             `json:"truncated,omitempty"`
}

// codeToolResult is one result as a model reads it: its text, and which
// formats it had (an image is attached beside).
type codeToolResult struct {
	IsMainResult bool     `json:"is_main_result,omitempty"`
	Text         string   `json:"text,omitempty"`
	Formats      []string `json:"formats"`
}

type codeToolError struct {
	Name      string `json:"name"`
	Value     string `json:"value"`
	Traceback string `json:"traceback,omitempty"`
}

type codeToolFile struct {
	Path        string `json:"path"`
	DownloadURL string `json:"download_url,omitempty"`
}

// imageTypes are the MIME types a result's image is attached as, in
// order of preference.
var imageTypes = []string{"image/png", "image/jpeg"}

func (s *Service) runCodeTool(ctx context.Context, r *core.Running, call Call) (Outcome, error) {
	var a runCodeArgs
	var failed *tools.Error
	if errors.As(tools.DecodeArgs(call.Args, &a), &failed) {
		return Outcome{Error: failed}, nil
	}
	timeout := time.Duration(a.TimeoutS) * time.Second
	switch {
	case strings.TrimSpace(a.Code) == "":
		return toolFailure(tools.KindInvalidArgument, "code is required"), nil
	case timeout == 0:
		timeout = defaultCodeToolTimeout
	case timeout < 0 || timeout > maxToolTimeout:
		return toolFailure(tools.KindInvalidArgument, "timeout_s must be between 1 and %d", int(maxToolTimeout.Seconds())), nil
	}
	id := a.ContextID
	if id == "" {
		c, err := s.defaultContext(ctx, r, a.Language, call)
		if errors.Is(err, errdefs.ErrInvalidArgument) || errors.Is(err, errdefs.ErrFailedPrecondition) {
			return toolFailure(tools.KindFailed, "%s", err.Error()), nil
		}
		if err != nil {
			return Outcome{}, r.Err(ctx, err)
		}
		id = c.ID
	}

	res := runCodeResult{ContextID: id}
	var stdout, stderr cappedBuffer
	var outcome Outcome
	end, err := r.Agent().RunCode(ctx, id, a.Code, timeout, true, func(ev agentclient.CodeEvent) error {
		switch {
		case ev.Result != nil:
			res.Results = append(res.Results, toolCodeResult(ev.Result, &outcome))
		case ev.Error != nil:
			res.Error = &codeToolError{Name: ev.Error.Name, Value: ev.Error.Value, Traceback: strings.Join(ev.Error.Traceback, "\n")}
		default:
			stdout.write([]byte(ev.Stdout))
			stderr.write([]byte(ev.Stderr))
		}
		return nil
	})
	if errors.Is(err, errdefs.ErrNotFound) {
		return toolFailure(tools.KindNotFound, "no code context %q in this sandbox: omit context_id to use the language's default one", id), nil
	}
	if err != nil {
		return Outcome{}, r.Err(ctx, err)
	}
	res.Stdout, res.Stderr, res.Truncated = stdout.String(), stderr.String(), stdout.truncated || stderr.truncated
	res.ExecutionCount, res.TimedOut, res.Restarted = end.ExecutionCount, end.TimedOut, end.Restarted
	for _, p := range end.Files {
		f := codeToolFile{Path: p}
		if u, err := s.DownloadURL(r.ID(), p); err == nil {
			f.DownloadURL = u
		}
		res.Files = append(res.Files, f)
	}
	if outcome.Result, err = json.Marshal(res); err != nil {
		return Outcome{}, err
	}
	switch {
	case res.TimedOut:
		outcome.Error = &tools.Error{Kind: tools.KindTimeout, Message: fmt.Sprintf(
			"the code ran past its %d s timeout and was interrupted; the context keeps its state unless restarted says otherwise", int(timeout.Seconds()))}
	case res.Error != nil:
		outcome.Error = &tools.Error{Kind: tools.KindCommandFailed, Message: res.Error.Name + ": " + res.Error.Value}
	}
	return outcome, nil
}

// defaultContext returns the sandbox's default context of a language,
// starting it on first use: it runs in the workspace as the call's user,
// with the environment a command gets.
func (s *Service) defaultContext(ctx context.Context, r *core.Running, language string, call Call) (agentclient.CodeContext, error) {
	if language == "" {
		language = "python"
	}
	env, err := r.CommandEnv(ctx, call.ForUser, nil)
	if err != nil {
		return agentclient.CodeContext{}, err
	}
	return r.Agent().CreateContext(ctx, agentclient.NewContext{
		Language: language, Cwd: rootfs.Workspace, User: rootfs.UserOr(call.User), Env: env,
		ID: "default-" + strings.ToLower(language),
	})
}

// toolCodeResult is a result as the tool tells it: its text, and its
// image attached to the outcome.
func toolCodeResult(r *agentclient.CodeResult, outcome *Outcome) codeToolResult {
	out := codeToolResult{IsMainResult: r.Main, Formats: []string{}}
	out.Formats = slices.Sorted(maps.Keys(r.Data))
	for _, mime := range []string{"text/markdown", "text/plain"} {
		var text string
		if json.Unmarshal(r.Data[mime], &text) == nil && text != "" {
			out.Text = text
			break
		}
	}
	for _, mime := range imageTypes {
		var b64 string
		if json.Unmarshal(r.Data[mime], &b64) != nil {
			continue
		}
		if data, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b64)); err == nil {
			outcome.Images = append(outcome.Images, Image{MIMEType: mime, Data: data})
			break
		}
	}
	return out
}
