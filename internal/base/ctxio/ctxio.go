// Package ctxio has a reader that stops with its context: a long copy (an
// image of gigabytes, a template's layers) ends at its next read once the
// context it was started for is cancelled, instead of running to its end.
package ctxio

import (
	"context"
	"io"
)

// Reader is r, whose reads fail with ctx's error once ctx has ended. It
// holds a context, against the rule, because it lives no longer than the
// call the context is for.
func Reader(ctx context.Context, r io.Reader) io.Reader {
	return reader{ctx, r}
}

type reader struct {
	ctx context.Context
	r   io.Reader
}

func (c reader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
