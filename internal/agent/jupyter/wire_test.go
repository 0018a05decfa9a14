package jupyter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/security/null"
)

// kernelMessage returns the frames of a message as a kernel sends it on
// iopub, in reply to the request parentID, signed by s.
func kernelMessage(t *testing.T, s signer, parentID, text string) [][]byte {
	t.Helper()
	hdr, err := json.Marshal(newHeader("kernel-session", "stream"))
	if err != nil {
		t.Fatal(err)
	}
	parent, err := json.Marshal(header{MsgID: parentID, MsgType: "execute_request"})
	if err != nil {
		t.Fatal(err)
	}
	// By hand, as text holds nothing to escape, and json.Marshal takes a
	// while over MaxMessageSize bytes under the race detector.
	content := []byte(`{"name":"stdout","text":"` + text + `"}`)
	signed := [][]byte{hdr, parent, []byte("{}"), content}
	return append([][]byte{[]byte("stream.stdout"), delimiter, s.sign(signed)}, signed...)
}

func TestSignature(t *testing.T) {
	key := signer{key: []byte("0123456789abcdef")}
	good := kernelMessage(t, key, "request-1", "hello")
	if m, err := key.decode(good); err != nil || m.Parent.MsgID != "request-1" || m.Header.MsgType != "stream" {
		t.Fatalf("decode a signed message: %+v, %v", m, err)
	}

	// changed returns good with frame i replaced.
	changed := func(i int, frame string) [][]byte {
		frames := append([][]byte(nil), good...)
		frames[i] = []byte(frame)
		return frames
	}
	for _, tc := range []struct {
		name   string
		signer signer
		frames [][]byte
		want   error
	}{
		{"content changed", key, changed(6, `{"name":"stdout","text":"HELLO"}`), errBadSignature},
		{"parent changed", key, changed(4, `{"msg_id":"request-2"}`), errBadSignature},
		{"signature changed", key, changed(2, strings.Repeat("0", 64)), errBadSignature},
		{"signature not hex", key, changed(2, "not hex"), errBadSignature},
		{"no signature", key, changed(2, ""), errBadSignature},
		{"other key", signer{key: []byte("another key")}, good, errBadSignature},
		{"no delimiter", key, changed(1, "<IDS|MSG"), errMalformed},
		{"too few frames", key, good[:6], errMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.signer.decode(tc.frames); !errors.Is(err, tc.want) {
				t.Errorf("decode: %v, want %v", err, tc.want)
			}
		})
	}

	t.Run("no key", func(t *testing.T) {
		// A connection without a key signs nothing and checks nothing.
		none := signer{}
		if _, err := none.decode(changed(2, "")); err != nil {
			t.Errorf("decode unsigned: %v", err)
		}
		frames, err := none.encode(newHeader("s", "kernel_info_request"), struct{}{})
		if err != nil || len(frames[1]) != 0 {
			t.Errorf("encode unsigned: %q, %v", frames, err)
		}
	})

	t.Run("round trip", func(t *testing.T) {
		h := newHeader("session", "execute_request")
		frames, err := key.encode(h, executeRequest{Code: "1+1"})
		if err != nil {
			t.Fatal(err)
		}
		m, err := key.decode(frames)
		if err != nil || m.Header != h || !bytes.Contains(m.Content, []byte(`"code":"1+1"`)) {
			t.Errorf("decode(encode()): %+v, %v", m, err)
		}
	})
}

// The client's reader drops what a kernel sends with a bad signature or
// over MaxMessageSize, and goes on to deliver the next message.
func TestReaderDrops(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	key := signer{key: []byte("key")}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan *zmq4.Conn, 1)
	go func() {
		defer close(accepted)
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		zc, err := zmq4.Open(nc, null.Security(), zmq4.Pub, zmq4.SocketIdentity("kernel"), true, nil)
		if err != nil {
			nc.Close()
			return
		}
		accepted <- zc
	}()
	s, err := dialSocket(ctx, "iopub", zmq4.Sub, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	kernelSide := <-accepted
	if kernelSide == nil {
		t.Fatal("the fake kernel's handshake failed")
	}

	c := newClient(string(key.key))
	c.shell, c.control, c.iopub = s, s, s
	c.start(s)
	defer func() { _ = c.Close() }()
	w := c.newWaiter()
	c.mu.Lock()
	c.waiters["request-1"] = w
	w.ids = append(w.ids, "request-1")
	c.mu.Unlock()
	defer c.unregister(w)

	huge := strings.Repeat("x", MaxMessageSize)
	for _, frames := range [][][]byte{
		kernelMessage(t, signer{key: []byte("not the key")}, "request-1", "forged"),
		kernelMessage(t, key, "request-1", huge),
		kernelMessage(t, key, "request-1", "genuine"),
	} {
		if err := kernelSide.SendMsg(zmq4.NewMsgFrom(frames...)); err != nil {
			t.Fatal(err)
		}
	}
	m, err := c.next(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(m.Content, []byte("genuine")) {
		t.Errorf("delivered %s, want the genuine message", m.Content)
	}
	if got := c.Dropped(); got != 2 {
		t.Errorf("Dropped() = %d, want 2", got)
	}
}
