package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
)

// hutch node ls prints each node's role, state, address, last heartbeat,
// capacity and what it holds, then why each lost one is lost; -o json
// the answer; a key that may not list them gets the daemon's message.
func TestNodeLs(t *testing.T) {
	nodes := []client.Node{
		{
			ID: "node-1", Role: "node", URL: "https://10.0.0.5:7070", State: "up", HeartbeatAt: fakeNow.Add(-2 * time.Second),
			CPUs: 8, MemoryMB: 16384, CommittedCPUs: 1.5, CommittedMemoryMB: 1536, Sandboxes: 3,
			Templates: map[string]string{"base": "v1", "python": "v2"}, Warm: map[string]int{"base@runc": 2, "base@gvisor": 1},
			Runtimes: []string{"runc", "gvisor"}, Version: "1.2.3",
		},
		{
			ID: "node-2", Role: "node", URL: "https://10.0.0.6:7070", State: "lost", Reason: "node node-2 lost: no heartbeat since 2025-06-01T11:00:00Z",
			HeartbeatAt: fakeNow.Add(-time.Hour), CPUs: 4, MemoryMB: 8192, Templates: map[string]string{}, Warm: map[string]int{}, Version: "1.2.3",
		},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path != "/v1/nodes":
			writeError(w, http.StatusNotFound, "not_found", "no such endpoint")
		case r.Header.Get("Authorization") != "Bearer "+fakeKey:
			writeError(w, http.StatusForbidden, "permission_denied", "key app may not list the nodes: use the daemon's own key (api.key)")
		default:
			writeJSON(w, http.StatusOK, nodes)
		}
	}))
	t.Cleanup(srv.Close)

	r := runAt(t, srv.URL, "node", "ls")
	want := "" +
		"NAME     ROLE   STATE   URL                     HEARTBEAT   CPUS    MEMORY       SANDBOXES   TEMPLATES   WARM                        VERSION\n" +
		"node-1   node   up      https://10.0.0.5:7070   2s          1.5/8   1.5/16 GiB   3           2           base@gvisor=1,base@runc=2   1.2.3\n" +
		"node-2   node   lost    https://10.0.0.6:7070   1h          0/4     0/8 GiB      0           0           -                           1.2.3\n" +
		"node node-2 lost: no heartbeat since 2025-06-01T11:00:00Z\n"
	if r.code != 0 || r.stdout != want {
		t.Errorf("hutch node ls: exit %d, stdout:\n%s\nstderr %q; want:\n%s", r.code, r.stdout, r.stderr, want)
	}

	r = runAt(t, srv.URL, "node", "ls", "-o", "json")
	var got []client.Node
	if err := json.Unmarshal([]byte(r.stdout), &got); r.code != 0 || err != nil || len(got) != 2 || got[1].State != "lost" || got[0].Warm["base@runc"] != 2 {
		t.Errorf("hutch node ls -o json: exit %d, %v, %+v\n%s", r.code, err, got, r.stdout)
	}

	var out strings.Builder
	a := &app{stdin: strings.NewReader(""), stdout: &out, stderr: &out, lookupEnv: func(string) (string, bool) { return "", false },
		newClient: func() (*client.Client, error) { return client.New(srv.URL, "hutch_a-workspace-key") }, now: func() time.Time { return fakeNow }}
	if code := a.run(t.Context(), []string{"node", "ls"}); code != exitError || !strings.Contains(out.String(), "may not list the nodes") {
		t.Errorf("hutch node ls with a workspace's key: exit %d, %q; want %d and the daemon's message", code, out.String(), exitError)
	}
}
