package agentclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"connectrpc.com/connect"

	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// mapError turns an error of a Connect call to the agent made under ctx
// into an errdefs kind (see Client). io.EOF, which ends streams, passes
// unchanged. A cancellation or deadline is the caller's when ctx is done;
// otherwise the connection or the agent ended the call (Connect reports a
// connection reset as canceled), which is Unavailable.
func mapError(ctx context.Context, err error) error {
	if err == nil || errors.Is(err, io.EOF) {
		return err
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
			return err
		}
		return errdefs.Unavailable("agent unavailable: %v", err)
	}
	msg := ce.Message()
	switch ce.Code() {
	case connect.CodeNotFound:
		return errdefs.NotFound("%s", msg)
	case connect.CodeInvalidArgument, connect.CodeOutOfRange:
		return errdefs.InvalidArgument("%s", msg)
	case connect.CodeAlreadyExists:
		return errdefs.AlreadyExists("%s", msg)
	case connect.CodeFailedPrecondition:
		return errdefs.FailedPrecondition("%s", msg)
	case connect.CodePermissionDenied:
		return errdefs.FailedPrecondition("permission denied: %s", msg)
	case connect.CodeResourceExhausted:
		return errdefs.ResourceExhausted("%s", msg)
	case connect.CodeUnimplemented:
		return errdefs.NotImplemented("%s", msg)
	case connect.CodeUnavailable:
		return errdefs.Unavailable("agent unavailable: %s", msg)
	case connect.CodeCanceled, connect.CodeDeadlineExceeded:
		switch {
		case ctx.Err() == nil:
			return errdefs.Unavailable("agent unavailable: %s", msg)
		case errors.Is(err, ctx.Err()):
			return err
		}
		return fmt.Errorf("agent: %s: %w", msg, ctx.Err())
	default:
		return fmt.Errorf("agent: %w", err)
	}
}

// transportError describes a failed HTTP exchange with the agent.
func transportError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("agent: %w", ctx.Err())
	}
	return errdefs.Unavailable("agent unavailable: %v", err)
}

// httpError reads the agent's {"code","message"} error answer.
func httpError(resp *http.Response) error {
	var body struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	code := connect.CodeUnknown
	if err := decodeJSON(io.LimitReader(resp.Body, 64<<10), &body); err == nil && body.Code != "" {
		if err := code.UnmarshalText([]byte(body.Code)); err != nil {
			code = connect.CodeUnknown
		}
	}
	if code == connect.CodeUnknown {
		code = codeOfStatus(resp.StatusCode)
	}
	msg := strings.TrimSpace(body.Message)
	if msg == "" {
		msg = resp.Status
	}
	return mapError(resp.Request.Context(), connect.NewError(code, errors.New(msg)))
}

func codeOfStatus(status int) connect.Code {
	switch status {
	case http.StatusBadRequest:
		return connect.CodeInvalidArgument
	case http.StatusNotFound:
		return connect.CodeNotFound
	case http.StatusConflict:
		return connect.CodeAlreadyExists
	case http.StatusForbidden:
		return connect.CodePermissionDenied
	case http.StatusPreconditionFailed:
		return connect.CodeFailedPrecondition
	case http.StatusInsufficientStorage, http.StatusRequestEntityTooLarge, http.StatusTooManyRequests:
		return connect.CodeResourceExhausted
	case http.StatusNotImplemented:
		return connect.CodeUnimplemented
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return connect.CodeUnavailable
	default:
		return connect.CodeInternal
	}
}

func decodeJSON(r io.Reader, v any) error {
	return json.NewDecoder(r).Decode(v)
}

// errorInterceptor applies mapError to every Connect call.
type errorInterceptor struct{}

func (errorInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		resp, err := next(ctx, req)
		return resp, mapError(ctx, err)
	}
}

func (errorInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		return errorConn{StreamingClientConn: next(ctx, spec), ctx: ctx}
	}
}

func (errorInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// errorConn applies mapError to a stream's calls. It keeps the context the
// stream was opened with, which lives as long as the stream, to tell
// whose cancellation ended it.
type errorConn struct {
	connect.StreamingClientConn
	ctx context.Context
}

func (c errorConn) Send(msg any) error { return mapError(c.ctx, c.StreamingClientConn.Send(msg)) }
func (c errorConn) Receive(msg any) error {
	return mapError(c.ctx, c.StreamingClientConn.Receive(msg))
}
func (c errorConn) CloseRequest() error { return mapError(c.ctx, c.StreamingClientConn.CloseRequest()) }
func (c errorConn) CloseResponse() error {
	return mapError(c.ctx, c.StreamingClientConn.CloseResponse())
}
