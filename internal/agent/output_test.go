package agent

import (
	"os"
	"testing"
)

// A pipe is drained when nothing written to it waits unread or
// unpublished: what the end of a command waits for while something of its
// tree may still hold the pipe open.
func TestOutputPipeDrained(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	p := &outputPipe{f: r, done: make(chan struct{})}
	defer p.f.Close()
	if !p.drained() {
		t.Error("an empty pipe is not drained")
	}
	if _, err := w.Write([]byte("written before the exit")); err != nil {
		t.Fatal(err)
	}
	if p.drained() {
		t.Error("a pipe holding unread output is drained")
	}
	buf := make([]byte, 64)
	if _, err := r.Read(buf); err != nil {
		t.Fatal(err)
	}
	p.busy.Store(true)
	if p.drained() {
		t.Error("a pipe whose output is being published is drained")
	}
	p.busy.Store(false)
	if !p.drained() {
		t.Error("a pipe read and published is not drained")
	}
	close(p.done)
	if !p.drained() {
		t.Error("a pipe read to EOF is not drained")
	}
}
