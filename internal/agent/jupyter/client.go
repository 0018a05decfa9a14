package jupyter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zeromq/zmq4"
)

var (
	// ErrClosed is what calls on a client return after Close.
	ErrClosed = errors.New("jupyter client closed")
	// ErrKernelGone is wrapped by what calls return once a connection to
	// the kernel has broken: usually the kernel exited or was killed.
	ErrKernelGone = errors.New("kernel connection lost")
)

// nudgeInterval is how often WaitReady repeats its kernel_info_request
// until both the reply and iopub traffic have arrived.
const nudgeInterval = 100 * time.Millisecond

// Client talks to one kernel over its shell, control and iopub channels.
//
// Execute and WaitReady take turns: one runs at a time, and another waits
// (within its context) for it to end. Interrupt, Done, Err, Dropped and
// Close may be called at any time from any goroutine; Interrupt is how a
// caller stops code that Execute is waiting on.
type Client struct {
	// Linger, when set (before the first Execute), is how long Execute
	// goes on reading a request's output after the kernel said it was
	// idle, until the kernel has been quiet that long: for kernels that
	// publish some output on another path than their status (Deno's
	// execute_result comes from its JavaScript side, and can come after
	// its idle).
	Linger time.Duration

	signer  signer
	session string
	shell   *socket
	control *socket
	iopub   *socket

	turn chan struct{} // holds a token while Execute or WaitReady runs

	mu      sync.Mutex
	waiters map[string]*waiter // by the msg_id of the request they await replies to

	done     chan struct{} // closed once the client is unusable
	err      error         // why; written before done is closed
	failOnce sync.Once
	readers  sync.WaitGroup
	dropped  atomic.Int64
}

// waiter receives the messages, from every channel, whose parent is one of
// the requests it was registered for.
type waiter struct {
	ids  []string // guarded by Client.mu
	ch   chan *message
	gone chan struct{} // closed when unregistered, so no reader blocks on ch
}

// Dial connects to the kernel described by ci: shell and control as DEALER
// sockets, iopub as a SUB socket subscribed to everything. It waits for the
// kernel's ports to accept connections (a kernel just started may not have
// bound them yet), until ctx ends, but not for the kernel to answer: call
// WaitReady before the first Execute.
func Dial(ctx context.Context, ci ConnectionInfo) (_ *Client, err error) {
	if ci.Transport != "tcp" {
		return nil, fmt.Errorf("dial kernel: transport %q is not supported", ci.Transport)
	}
	if ci.Key != "" && ci.SignatureScheme != signatureScheme {
		return nil, fmt.Errorf("dial kernel: signature scheme %q is not supported", ci.SignatureScheme)
	}
	c := newClient(ci.Key)
	var dialed []*socket
	defer func() {
		if err != nil {
			for _, s := range dialed {
				s.nc.Close()
			}
		}
	}()
	for _, ch := range []struct {
		dst  **socket
		name string
		typ  zmq4.SocketType
		port int
	}{
		{&c.shell, "shell", zmq4.Dealer, ci.ShellPort},
		{&c.control, "control", zmq4.Dealer, ci.ControlPort},
		{&c.iopub, "iopub", zmq4.Sub, ci.IOPubPort},
	} {
		s, err := dialSocket(ctx, ch.name, ch.typ, net.JoinHostPort(ci.IP, strconv.Itoa(ch.port)))
		if err != nil {
			return nil, err
		}
		dialed = append(dialed, s)
		*ch.dst = s
	}
	// In ZMTP 3.0 a subscription is a message: byte 1, then the topic
	// prefix, here empty, which matches every topic.
	if err := c.iopub.send(ctx, [][]byte{{1}}); err != nil {
		return nil, fmt.Errorf("subscribe to kernel iopub: %w", err)
	}
	c.start(dialed...)
	return c, nil
}

func newClient(key string) *Client {
	return &Client{
		signer:  signer{key: []byte(key)},
		session: newID(),
		turn:    make(chan struct{}, 1),
		waiters: make(map[string]*waiter),
		done:    make(chan struct{}),
	}
}

// start starts a reader for each socket.
func (c *Client) start(sockets ...*socket) {
	for _, s := range sockets {
		c.readers.Add(1)
		go c.read(s)
	}
}

// WaitReady returns once the kernel answers a kernel_info_request and its
// iopub messages reach the client. The second matters as much as the
// first: the kernel applies the subscription some time after the
// connection (ZeroMQ's "slow joiner"), and output it publishes before then
// is lost. So, like jupyter_client, WaitReady repeats the request every
// nudgeInterval until both have arrived. A kernel that dies once dialed
// ends WaitReady at once (ErrKernelGone); one that never answers keeps it
// waiting until ctx ends.
func (c *Client) WaitReady(ctx context.Context) error {
	release, err := c.take(ctx)
	if err != nil {
		return fmt.Errorf("wait for kernel: %w", err)
	}
	defer release()
	w := c.newWaiter()
	defer c.unregister(w)
	nudge := time.NewTicker(nudgeInterval)
	defer nudge.Stop()

	var replied, heard bool
	for send := true; !replied || !heard; {
		if send {
			if err := c.request(ctx, c.shell, w, "kernel_info_request", struct{}{}); err != nil {
				return fmt.Errorf("wait for kernel: %w", err)
			}
			send = false
		}
		select {
		case m := <-w.ch:
			replied = replied || m.channel == "shell" && m.Header.MsgType == "kernel_info_reply"
			heard = heard || m.channel == "iopub"
		case <-nudge.C:
			send = true
		case <-ctx.Done():
			return fmt.Errorf("wait for kernel: %w", ctx.Err())
		case <-c.done:
			return fmt.Errorf("wait for kernel: %w", c.err)
		}
	}
	return nil
}

// Interrupt asks the kernel, on the control channel, to interrupt the code
// it is running, and waits for its answer. This is for kernels whose
// interrupt_mode is "message"; those with "signal" (ipykernel's default)
// are interrupted by sending SIGINT to the kernel's process, which is the
// caller's to do. (ipykernel 6 also takes the message, by signalling
// itself.) Interrupt may be called while Execute runs.
func (c *Client) Interrupt(ctx context.Context) error {
	w := c.newWaiter()
	defer c.unregister(w)
	if err := c.request(ctx, c.control, w, "interrupt_request", struct{}{}); err != nil {
		return fmt.Errorf("interrupt kernel: %w", err)
	}
	for {
		m, err := c.next(ctx, w)
		if err != nil {
			return fmt.Errorf("interrupt kernel: %w", err)
		}
		if m.channel != "control" || m.Header.MsgType != "interrupt_reply" {
			continue
		}
		var r struct {
			Status string `json:"status"`
			EValue string `json:"evalue"`
		}
		if err := json.Unmarshal(m.Content, &r); err != nil {
			return fmt.Errorf("interrupt kernel: malformed interrupt_reply: %w", err)
		}
		if r.Status == "error" {
			return fmt.Errorf("interrupt kernel: the kernel refused: %s", r.EValue)
		}
		return nil
	}
}

// Done is closed once the client can no longer be used: after Close, or
// when a connection to the kernel has broken.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err says why Done is closed: ErrClosed, or an error wrapping
// ErrKernelGone. It is nil while Done is open.
func (c *Client) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// Dropped counts the messages the kernel sent that were dropped: signature
// not matching, malformed, or over MaxMessageSize. Messages that belong to
// no pending request are ignored, not counted.
func (c *Client) Dropped() int64 { return c.dropped.Load() }

// Close closes the connections to the kernel and returns once the client's
// goroutines have ended; calls still running return ErrClosed. It leaves
// the kernel process alone, and always returns nil.
func (c *Client) Close() error {
	c.fail(ErrClosed)
	c.readers.Wait()
	return nil
}

// fail makes the client unusable for the reason err (the first reason
// wins) and closes every connection, which ends the readers.
func (c *Client) fail(err error) {
	c.failOnce.Do(func() {
		c.err = err
		close(c.done)
		for _, s := range []*socket{c.shell, c.control, c.iopub} {
			s.nc.Close()
		}
	})
}

// read receives the messages of one channel until its connection ends,
// and hands each to the waiter of its parent request, if there is one.
func (c *Client) read(s *socket) {
	defer c.readers.Done()
	for {
		zm, err := s.zc.RecvMsg()
		if err != nil {
			c.fail(fmt.Errorf("%w: %s channel: %w", ErrKernelGone, s.name, err))
			return
		}
		if zm.Type == zmq4.CmdMsg {
			continue // a PING, answered by zmq4
		}
		m, err := c.signer.decode(zm.Frames)
		if err != nil {
			c.dropped.Add(1)
			continue
		}
		m.channel = s.name
		c.dispatch(m)
	}
}

func (c *Client) dispatch(m *message) {
	c.mu.Lock()
	w := c.waiters[m.Parent.MsgID]
	c.mu.Unlock()
	if w == nil {
		return
	}
	select {
	case w.ch <- m:
	case <-w.gone:
	case <-c.done:
	}
}

// take waits for the turn to Execute or WaitReady; release gives it back.
func (c *Client) take(ctx context.Context) (release func(), err error) {
	if err := c.Err(); err != nil {
		return nil, err
	}
	select {
	case c.turn <- struct{}{}:
		return func() { <-c.turn }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.done:
		return nil, c.err
	}
}

// newWaiter returns a waiter with no requests yet. Its channel is
// unbuffered so that each reader holds at most one message at a time.
func (c *Client) newWaiter() *waiter {
	return &waiter{ch: make(chan *message), gone: make(chan struct{})}
}

func (c *Client) unregister(w *waiter) {
	c.mu.Lock()
	for _, id := range w.ids {
		delete(c.waiters, id)
	}
	c.mu.Unlock()
	close(w.gone)
}

// request sends a new request on s, with w registered for its replies
// before it leaves, so that none can arrive unclaimed. A send that fails
// may have left part of the request on the wire, so it fails the client.
func (c *Client) request(ctx context.Context, s *socket, w *waiter, msgType string, content any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	h := newHeader(c.session, msgType)
	frames, err := c.signer.encode(h, content)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.waiters[h.MsgID] = w
	w.ids = append(w.ids, h.MsgID)
	c.mu.Unlock()
	if err := s.send(ctx, frames); err != nil {
		// The first reason wins: a send cut by Close reports ErrClosed.
		c.fail(fmt.Errorf("%w: %s channel: %w", ErrKernelGone, s.name, err))
		return fmt.Errorf("send %s: %w", msgType, c.err)
	}
	return nil
}

// next returns the next message for w, or why none can come.
func (c *Client) next(ctx context.Context, w *waiter) (*message, error) {
	select {
	case m := <-w.ch:
		return m, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.done:
		return nil, c.err
	}
}
