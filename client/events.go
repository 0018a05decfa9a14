package client

import (
	"context"
	"encoding/json"
	"fmt"
	"mime"
)

// followEvents reads the server-sent events r answers with, handing each
// event named name, decoded, to fn, until ctx ends (then it returns nil),
// fn fails, or the daemon reports an error. what names the stream in
// errors.
func followEvents[T any](ctx context.Context, c *Client, r request, what, name string, fn func(T) error) error {
	r.accept = "text/event-stream"
	resp, err := c.do(ctx, r)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		return fmt.Errorf("%s: unexpected response content type %q", what, mt)
	}
	sse := newSSEReader(resp.Body)
	for {
		ev, err := sse.nextBefore(ctx, what+" stream ended")
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		switch ev.name {
		case name:
			var v T
			if err := json.Unmarshal(ev.data, &v); err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			if err := fn(v); err != nil {
				return err
			}
		case "error":
			return decodeErrorEvent(ev.data)
		}
	}
}
