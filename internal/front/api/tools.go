package api

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"net/http"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/agent/tools"
	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core/exec"
	"github.com/hutchdev/hutch/internal/core/toolrun"
)

// listTools serves GET /v1/tools[?format=openai|anthropic]: the catalogue
// as a model's function-calling API takes it. Hutch's own format is
// Anthropic's.
func (s *Server) listTools(w http.ResponseWriter, r *http.Request) {
	switch format := r.URL.Query().Get("format"); format {
	case "", "anthropic":
		out := []client.Tool{}
		for _, t := range tools.Catalogue {
			out = append(out, client.Tool{Name: t.Name, Description: t.Description, InputSchema: t.Schema})
		}
		writeJSON(w, http.StatusOK, struct {
			Tools []client.Tool `json:"tools"`
		}{out})
	case "openai":
		type function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		}
		type openAITool struct {
			Type     string   `json:"type"`
			Function function `json:"function"`
		}
		out := []openAITool{}
		for _, t := range tools.Catalogue {
			out = append(out, openAITool{Type: "function", Function: function{Name: t.Name, Description: t.Description, Parameters: t.Schema}})
		}
		writeJSON(w, http.StatusOK, struct {
			Tools []openAITool `json:"tools"`
		}{out})
	default:
		writeError(w, r, s.log, errdefs.InvalidArgument("format must be anthropic (the default) or openai, got %q", format))
	}
}

// runTool serves POST /v1/sandboxes/{id}/tools/{name}[?user=U][&mode=M], the body
// the tool's arguments (a JSON object). It answers with a client.ToolResult;
// with Accept: text/event-stream, with events: tool.call when the tool
// starts, tool.output as a command writes ({stream, data}), and
// tool.message, a client.ToolResult, at the end.
func (s *Server) runTool(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	args, err := io.ReadAll(r.Body) // bounded by maxBodyOf
	if err != nil {
		writeError(w, r, s.log, errdefs.Prefix(err, "read the arguments"))
		return
	}
	if len(bytes.TrimSpace(args)) == 0 {
		args = []byte("{}")
	}
	if !json.Valid(args) || bytes.TrimSpace(args)[0] != '{' {
		writeError(w, r, s.log, errdefs.InvalidArgument("the body must be the tool's arguments, a JSON object of at most %d MiB", MaxCreateBody>>20))
		return
	}
	mode, err := toolMode(r.Context(), r.URL.Query().Get("mode"))
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	call := toolrun.Call{Name: name, Args: args, User: r.URL.Query().Get("user"), Mode: mode, ForUser: callerOf(r.Context()).user}
	if !acceptsEvents(r) {
		outcome, err := s.tools.RunTool(r.Context(), r.PathValue("id"), call, nil)
		if err != nil {
			writeError(w, r, s.log, err)
			return
		}
		writeJSON(w, http.StatusOK, toolResult(outcome))
		return
	}
	sse := &sseWriter{w: w}
	if _, ok := tools.Lookup(name); ok {
		if err := sse.event("tool.call", struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}{name, args}); err != nil {
			return
		}
	}
	text := utf8Carry{emit: func(st exec.Stream, b []byte) error {
		return sse.event("tool.output", toolOutput{Stream: string(st), outputData: outputEvent(b)})
	}}
	outcome, err := s.tools.RunTool(r.Context(), r.PathValue("id"), call, text.send)
	if err == nil {
		err = text.flush()
	}
	s.endStream(w, r, sse, err, "tool.message", toolResult(outcome))
}

// toolOutput is the data of a tool.output event.
type toolOutput struct {
	Stream string `json:"stream"`
	outputData
}

func toolResult(o toolrun.Outcome) client.ToolResult {
	res := client.ToolResult{Status: client.ToolSuccess, Result: o.Result, RanOn: o.Where, Why: o.Why, UndoCheckpoint: o.Checkpoint}
	for _, img := range o.Images {
		res.Images = append(res.Images, client.ToolImage{MIMEType: img.MIMEType, Data: img.Data})
	}
	if o.Error != nil {
		res.Status, res.Error = client.ToolError, &client.ToolFailure{Kind: o.Error.Kind, Message: o.Error.Message}
	}
	return res
}

// download serves GET /v1/downloads/{token}, a URL sandbox_download_url
// made: the token, not the API key, allows it. A directory's files are
// redacted before it is compressed, which the redaction of the answer
// could not do (see redaction.go); it still passes over the compressed
// bytes, where no value is left to find.
func (s *Server) download(w http.ResponseWriter, r *http.Request) {
	c := callerOf(r.Context())
	secrets := s.redactor.Set()
	name, body, err := s.tools.Download(r.Context(), r.PathValue("token"), func(id string) error {
		if c.anonymous {
			return nil // the token alone allows it
		}
		if err := s.mayReach(r.Context(), c, id); err != nil {
			return errdefs.NotFound("no such download")
		}
		return nil
	}, secrets)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	defer body.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	w.Header().Set("Cache-Control", "private, no-store")
	if _, err := io.Copy(w, body); err != nil {
		s.log.Warn("download cut short", "error", err)
	}
}
