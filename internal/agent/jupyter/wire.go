package jupyter

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// protocolVersion is the version of the messaging protocol this client
// speaks, as its headers say.
const protocolVersion = "5.3"

// delimiter separates a message's ZeroMQ routing identities (or, on iopub,
// its topic) from the Jupyter frames.
var delimiter = []byte("<IDS|MSG>")

var (
	errBadSignature = errors.New("signature does not match")
	errMalformed    = errors.New("malformed message")
)

// header is a message's header; a reply's parent_header is its request's.
type header struct {
	MsgID    string `json:"msg_id"`
	Session  string `json:"session"`
	Username string `json:"username"`
	Date     string `json:"date"`
	MsgType  string `json:"msg_type"`
	Version  string `json:"version"`
}

// message is a received message whose signature has been verified. Its
// metadata frame is not kept: what this client needs (execute_result's and
// display_data's metadata) travels in the content.
type message struct {
	channel string // "shell", "control" or "iopub": which socket it came on
	Header  header
	Parent  header
	Content json.RawMessage
}

// signer signs and verifies messages with a connection's key. An empty key
// means the kernel does not sign (Jupyter's "no authentication"), and then
// neither does the client.
type signer struct {
	key []byte
}

// mac returns the HMAC-SHA256 of the four signed frames: header,
// parent_header, metadata and content, as they are on the wire.
func (s signer) mac(frames [][]byte) []byte {
	m := hmac.New(sha256.New, s.key)
	for _, f := range frames {
		m.Write(f)
	}
	return m.Sum(nil)
}

func (s signer) sign(frames [][]byte) []byte {
	if len(s.key) == 0 {
		return nil
	}
	return []byte(hex.EncodeToString(s.mac(frames)))
}

func (s signer) verify(signature []byte, frames [][]byte) bool {
	if len(s.key) == 0 {
		return true
	}
	got := make([]byte, hex.DecodedLen(len(signature)))
	if _, err := hex.Decode(got, signature); err != nil {
		return false
	}
	return hmac.Equal(got, s.mac(frames))
}

// encode returns the frames of a request: the delimiter, the signature,
// then header, an empty parent_header, empty metadata and the content. A
// DEALER sends no routing identity of its own: the kernel's ROUTER adds it.
func (s signer) encode(h header, content any) ([][]byte, error) {
	hdr, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("encode %s header: %w", h.MsgType, err)
	}
	body, err := json.Marshal(content)
	if err != nil {
		return nil, fmt.Errorf("encode %s content: %w", h.MsgType, err)
	}
	signed := [][]byte{hdr, []byte("{}"), []byte("{}"), body}
	return append([][]byte{delimiter, s.sign(signed)}, signed...), nil
}

// decode verifies and parses a received message. Frames before the
// delimiter (identities, the iopub topic) and buffers after the content
// are ignored.
func (s signer) decode(frames [][]byte) (*message, error) {
	i := 0
	for i < len(frames) && !bytes.Equal(frames[i], delimiter) {
		i++
	}
	if len(frames) < i+6 {
		return nil, fmt.Errorf("%w: %d frames", errMalformed, len(frames))
	}
	signed := frames[i+2 : i+6]
	if !s.verify(frames[i+1], signed) {
		return nil, errBadSignature
	}
	m := &message{Content: json.RawMessage(signed[3])}
	if err := json.Unmarshal(signed[0], &m.Header); err != nil {
		return nil, fmt.Errorf("%w: header: %w", errMalformed, err)
	}
	if err := json.Unmarshal(signed[1], &m.Parent); err != nil {
		return nil, fmt.Errorf("%w: parent_header: %w", errMalformed, err)
	}
	return m, nil
}

// newID returns a random UUID (version 4) in its usual text form, for
// message ids and the session id.
func newID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// newHeader returns the header of a new request in session.
func newHeader(session, msgType string) header {
	return header{
		MsgID:    newID(),
		Session:  session,
		Username: "hutch",
		Date:     time.Now().UTC().Format(time.RFC3339Nano),
		MsgType:  msgType,
		Version:  protocolVersion,
	}
}
