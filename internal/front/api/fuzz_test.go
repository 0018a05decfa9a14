package api

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/hutchdev/hutch/client"
)

// bodies makes a value of every JSON body the API decodes.
var bodies = []func() any{
	func() any { return &client.CreateSandboxRequest{} },
	func() any { return &client.UpdateSandboxRequest{} },
	func() any { return &client.ExecRequest{} },
	func() any { return &client.CodeRequest{} },
	func() any { return &client.CreateContextRequest{} },
	func() any { return &client.StartProcessRequest{} },
	func() any { return &client.StartServiceRequest{} },
	func() any { return &client.ProcessInputRequest{} },
	func() any { return &client.SignalRequest{} },
	func() any { return &client.ScreenshotRequest{} },
	func() any { return &client.ServiceLinkRequest{} },
	func() any { return &client.SnapshotRequest{} },
	func() any { return &client.ForkRequest{} },
	func() any { return &client.BuildTemplateRequest{} },
	func() any { return &client.CreateAPIKeyRequest{} },
	func() any { return &client.SetSecretRequest{} },
	func() any { return &client.Quota{} },
}

// FuzzDecodeBodies: any body, for any of the API's JSON bodies, decodes
// or is refused with a kind (never a panic, never an internal error);
// what decodes encodes again to a body that decodes the same.
func FuzzDecodeBodies(f *testing.F) {
	f.Add(uint8(0), []byte(`{"template":"base","env":{"A":"1"},"files":{"a.txt":"x"},"network":{"mode":"allowlist","allow":["pypi.org"]}}`))
	f.Add(uint8(2), []byte(`{"cmd":["ls","-la"],"stdin":"x","timeout_s":5,"env":{"K":"V"}}`))
	f.Add(uint8(5), []byte(`{"name":"web","command":"npm start","port":3000}`))
	f.Add(uint8(13), []byte(`{"name":"t","hutchfile":"FROM base\nRUN true"}`))
	f.Add(uint8(16), []byte(`{"sandboxes":3,"memory_mb":1e3}`))
	f.Add(uint8(1), []byte(`{"unknown":1}`))
	f.Add(uint8(3), []byte(`{} {}`))
	f.Add(uint8(4), []byte("\xff"))
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		v := bodies[int(which)%len(bodies)]()
		err := decode(httptest.NewRequest("POST", "/", bytes.NewReader(body)), v)
		if err != nil {
			if status, _ := statusOf(err); status != 400 {
				t.Fatalf("%T from %q: %v, status %d, want 400", v, body, err, status)
			}
			return
		}
		again, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("%T decoded from %q does not encode: %v", v, body, err)
		}
		w := bodies[int(which)%len(bodies)]()
		if err := decode(httptest.NewRequest("POST", "/", bytes.NewReader(again)), w); err != nil {
			t.Fatalf("%T: %q decoded, its encoding %q does not: %v", v, body, again, err)
		}
		if again2, _ := json.Marshal(w); !bytes.Equal(again, again2) {
			t.Fatalf("%T: %q then %q", v, again, again2)
		}
	})
}
