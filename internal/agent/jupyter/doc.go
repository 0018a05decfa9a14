// Package jupyter is the agent's client for Jupyter kernels: it speaks the
// Jupyter messaging protocol (v5.3) over ZeroMQ to a kernel running in the
// same sandbox, on 127.0.0.1. It neither starts nor stops kernel processes;
// its caller does, with the connection file this package writes.
//
// # Trust
//
// The kernel runs the user's code, so everything it sends is untrusted: the
// signature of every message is checked and a message that fails is dropped;
// no message may be larger than MaxMessageSize, so a kernel cannot make the
// agent (root, beside it in the sandbox) allocate without limit; and a kernel
// that stops answering or dies cannot hang the agent, since every call takes a
// context and a dead connection fails every call.
//
// # How ZeroMQ is used
//
// The ZMTP codec (greeting, NULL handshake, framing) is
// github.com/go-zeromq/zmq4's, through zmq4.Open on a net.Conn this package
// dials and owns. Its Socket layer is not used, for reasons its code and
// issues show: Recv takes no context and blocks until the socket is closed;
// each connection's reader goroutine can block forever sending on a full
// queue once nobody receives, so goroutines can outlive Close; Dial retries
// with a sleep outside any context; and frames are allocated at whatever size
// their header claims. Owning the connection gives: one reader goroutine per
// channel that ends when its connection is closed, a write deadline taken
// from the caller's context, and a frame limiter (limit.go) below zmq4.
//
// zmq4 speaks ZMTP 3.0, so a subscription is a message whose first byte is 1,
// which libzmq (ipykernel) and zmq.rs (Deno's kernel) accept from 3.0 peers;
// neither sends ZMTP 3.1 heartbeats (PING) to a 3.0 peer, which matters since
// zmq4 answers a PING from the reading goroutine, outside this package's
// write lock.
//
// # Channels
//
// The client connects to shell and control (DEALER) and iopub (SUB,
// subscribed to everything). stdin is not used (requests say
// allow_stdin: false) and neither is the heartbeat: a dead kernel closes its
// TCP connections, which fails the client at once.
package jupyter
