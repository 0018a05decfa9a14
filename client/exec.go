package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
)

// Exec runs a command in sandbox id and waits for it to end. A non-zero exit
// is a result, not an error. Output is capped at 1 MiB per stream (see
// ExecResult.Truncated); use ExecStream for more, or to see it as it comes.
func (c *Client) Exec(ctx context.Context, id string, req ExecRequest) (*ExecResult, error) {
	return c.run(ctx, id, "exec", req)
}

// RunCode runs code in a language in sandbox id and waits for it to end,
// as Exec does. A language the sandbox's template lacks is an error
// (IsFailedPrecondition) naming the templates that have it.
func (c *Client) RunCode(ctx context.Context, id string, req CodeRequest) (*ExecResult, error) {
	return c.run(ctx, id, "code", req)
}

// RunCodeStream runs code in a language in sandbox id, streaming its output
// to fn as ExecStream does.
func (c *Client) RunCodeStream(ctx context.Context, id string, req CodeRequest, fn func(ExecEvent) error) (*ExecExit, error) {
	return c.runStream(ctx, id, "code", req, fn)
}

// run posts a command (exec) or code (code) to sandbox id and decodes the
// result.
func (c *Client) run(ctx context.Context, id, what string, req any) (*ExecResult, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	var res ExecResult
	r := request{method: http.MethodPost, path: sandboxPath(id, what), json: req}
	if err := c.call(ctx, r, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// ExecStream runs a command in sandbox id, calling fn with each chunk of
// output as soon as it arrives, and returns how the command ended. fn runs on
// the calling goroutine; if it returns an error, the stream is abandoned and
// ExecStream returns that error. An error the daemon reports in the middle of
// the stream comes back as an *Error with StatusCode 0.
func (c *Client) ExecStream(ctx context.Context, id string, req ExecRequest, fn func(ExecEvent) error) (*ExecExit, error) {
	return c.runStream(ctx, id, "exec", req, fn)
}

// runStream posts a command (exec) or code (code) to sandbox id and reads
// the events of its run.
func (c *Client) runStream(ctx context.Context, id, what string, req any, fn func(ExecEvent) error) (*ExecExit, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	r := request{method: http.MethodPost, path: sandboxPath(id, what), json: req, accept: "text/event-stream"}
	resp, err := c.do(ctx, r)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()

	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch mt {
	case "text/event-stream":
	case "application/json":
		// A daemon that does not stream answers the plain result.
		return deliverResult(resp.Body, fn)
	default:
		return nil, fmt.Errorf("exec: unexpected response content type %q", mt)
	}

	sse := newSSEReader(resp.Body)
	for {
		ev, err := sse.nextBefore(ctx, "exec stream ended before the command exited")
		if err != nil {
			return nil, err
		}
		switch ev.name {
		case Stdout, Stderr:
			chunk, err := outputOf(ev)
			if err != nil {
				return nil, fmt.Errorf("exec: %w", err)
			}
			if len(chunk) == 0 {
				continue
			}
			if err := fn(ExecEvent{Stream: ev.name, Data: chunk}); err != nil {
				return nil, err
			}
		case "exit":
			var exit ExecExit
			if err := json.Unmarshal(ev.data, &exit); err != nil {
				return nil, fmt.Errorf("exec: decode exit event: %w", err)
			}
			return &exit, nil
		case "error":
			return nil, decodeErrorEvent(ev.data)
		}
		// Other events are reserved for later use; ignore them.
	}
}

// deliverResult hands a plain ExecResult to fn as if it had been streamed.
func deliverResult(body io.Reader, fn func(ExecEvent) error) (*ExecExit, error) {
	var res ExecResult
	if err := json.NewDecoder(body).Decode(&res); err != nil {
		return nil, fmt.Errorf("exec: decode result: %w", err)
	}
	for _, ev := range []ExecEvent{{Stdout, []byte(res.Stdout)}, {Stderr, []byte(res.Stderr)}} {
		if len(ev.Data) == 0 {
			continue
		}
		if err := fn(ev); err != nil {
			return nil, err
		}
	}
	return &ExecExit{ExitCode: res.ExitCode, DurationMS: res.DurationMS, TimedOut: res.TimedOut, KilledBy: res.KilledBy}, nil
}

// maxSSELine bounds one line of an event stream, so a broken peer cannot make
// the client buffer without end. Output chunks are far smaller.
const maxSSELine = 16 << 20

type sseEvent struct {
	name string
	data []byte
}

// decodeErrorEvent returns the *Error an "error" event carries: the
// failure of a stream that had already started.
func decodeErrorEvent(data []byte) error {
	var eb errorBody
	if err := json.Unmarshal(data, &eb); err != nil || eb.Error == nil {
		return fmt.Errorf("undecodable error event %q", data)
	}
	return &Error{Code: eb.Error.Code, Message: eb.Error.Message}
}

// nextBefore returns the next event of a stream whose last event has not
// come yet: its end is an error, cut saying what was still awaited, unless
// ctx ended it.
func (s *sseReader) nextBefore(ctx context.Context, cut string) (sseEvent, error) {
	ev, err := s.next()
	if err == nil {
		return ev, nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return sseEvent{}, ctxErr
	}
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return sseEvent{}, fmt.Errorf("%s: %w", cut, err)
}

// sseReader parses a text/event-stream (the WHATWG "server-sent events"
// format): it returns each event as soon as the blank line ending it has been
// read.
type sseReader struct {
	r *bufio.Reader
}

func newSSEReader(r io.Reader) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(r, 64<<10)}
}

// next returns the next event with data. At the end of the stream it returns
// io.EOF; an event cut off by the end is dropped, as the format says.
func (s *sseReader) next() (sseEvent, error) {
	var (
		name    string
		data    []byte
		hasData bool
	)
	for {
		line, err := s.readLine()
		if err != nil {
			return sseEvent{}, err
		}
		if len(line) == 0 {
			if hasData {
				if name == "" {
					name = "message"
				}
				return sseEvent{name: name, data: data}, nil
			}
			name = ""
			continue
		}
		if line[0] == ':' {
			continue // comment, e.g. a keep-alive
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			name = string(value)
		case "data":
			if hasData {
				data = append(data, '\n')
			}
			data = append(data, value...)
			hasData = true
		}
		// id and retry mean nothing here.
	}
}

// readLine returns one line without its LF or CRLF ending. The returned slice
// is valid until the next call.
func (s *sseReader) readLine() ([]byte, error) {
	line, err := s.r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		long := append([]byte(nil), line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			if len(long) > maxSSELine {
				return nil, fmt.Errorf("event stream line longer than %d bytes", maxSSELine)
			}
			line, err = s.r.ReadSlice('\n')
			long = append(long, line...)
		}
		line = long
	}
	if err != nil {
		// A last line without its ending is incomplete: the stream was cut.
		return nil, err
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

// outputOf decodes the data of a stdout or stderr event: text, or base64
// for bytes that are not UTF-8.
func outputOf(ev sseEvent) ([]byte, error) {
	var out struct {
		Data       *string `json:"data"`
		DataBase64 *string `json:"data_base64"`
	}
	if err := json.Unmarshal(ev.data, &out); err != nil {
		return nil, fmt.Errorf("decode %s event: %w", ev.name, err)
	}
	switch {
	case out.Data != nil:
		return []byte(*out.Data), nil
	case out.DataBase64 != nil:
		chunk, err := base64.StdEncoding.DecodeString(*out.DataBase64)
		if err != nil {
			return nil, fmt.Errorf("decode %s event: %w", ev.name, err)
		}
		return chunk, nil
	}
	return nil, nil
}
