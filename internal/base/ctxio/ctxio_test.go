package ctxio

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestReaderStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	r := Reader(ctx, strings.NewReader("abcdef"))
	p := make([]byte, 3)
	if n, err := r.Read(p); n != 3 || err != nil || string(p) != "abc" {
		t.Fatalf("first read = %d, %v, %q; want 3, nil, \"abc\"", n, err, p)
	}
	cancel()
	if n, err := r.Read(p); n != 0 || !errors.Is(err, context.Canceled) {
		t.Fatalf("read after cancel = %d, %v; want 0, context.Canceled", n, err)
	}
}

func TestReaderReadsToTheEnd(t *testing.T) {
	b, err := io.ReadAll(Reader(context.Background(), strings.NewReader("all of it")))
	if err != nil || string(b) != "all of it" {
		t.Fatalf("ReadAll = %q, %v", b, err)
	}
}
