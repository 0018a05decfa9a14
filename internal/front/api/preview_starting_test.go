package api

import (
	"net"
	"os"
	"strconv"
	"testing"

	"github.com/hutchdev/hutch/client"
)

// A preview request carries Target.Starting, which says whether a service
// on its port is starting (so that a request the port refuses waits): not
// before a service is there, yes once one is started and its port has not
// accepted, not for another port, not once the service is stopped.
func TestPreviewServiceStarting(t *testing.T) {
	t.Parallel()
	fp := &fakePreviews{}
	s := newTestServer(t, func(c *Config) { c.Previews = fp })
	id := previewSandbox(t, s.client)
	port := closedPort(t)
	starting := func(port int) bool {
		t.Helper()
		status, _, body, _ := previewCall(t, "GET", s.url+"/v1/sandboxes/"+id+"/ports/"+strconv.Itoa(port)+"/", "", testKey)
		got, _, _ := fp.last()
		if status != 200 || got.Port != port || got.Starting == nil {
			t.Fatalf("the preview request: %d %s, passed on %+v", status, body, got)
		}
		return got.Starting(t.Context())
	}
	if starting(port) {
		t.Error("starting, with no service in the sandbox")
	}
	if os.Geteuid() != 0 {
		t.Skip("the fake backend's agent needs root: it starts commands as the sandbox user")
	}
	ctx := t.Context()
	if _, err := s.client.StartService(ctx, id, client.StartServiceRequest{Name: "web", Cmd: []string{"sleep", "300"}, Cwd: s.be.Root(id), Port: port}); err != nil {
		t.Fatal(err)
	}
	if !starting(port) {
		t.Error("not starting, with a service whose port has not accepted")
	}
	if starting(port + 1) {
		t.Error("starting, for a port no service is on")
	}
	if _, err := s.client.StopService(ctx, id, "web"); err != nil {
		t.Fatal(err)
	}
	if starting(port) {
		t.Error("starting, with the service stopped")
	}
}

// closedPort is a port of the loopback that nothing listens on (it did a
// moment ago): a service on it stays starting.
func closedPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return port
}
