package agent

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/hutchdev/hutch/internal/agent/agentpb/hutchagent"
)

// TestAgentProcedures checks that the agent serves every method of the
// Agent service, and no other path.
func TestAgentProcedures(t *testing.T) {
	var want, got []string
	methods := hutchagent.File_agent_v1_agent_proto.Services().ByName("Agent").Methods()
	for i := range methods.Len() {
		want = append(want, "/hutch.agent.v1.Agent/"+string(methods.Get(i).Name()))
	}
	procs := agentProcedures(&agentService{})
	for _, p := range procs {
		got = append(got, p.path)
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("the agent serves %q, the Agent service has %q", got, want)
	}

	h := byProcedure(procs...)
	for path, code := range map[string]int{"/hutch.agent.v1.Agent/Nope": http.StatusNotFound, "/hutch.agent.v1.Agent/Health": http.StatusUnsupportedMediaType} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, path, nil))
		if w.Code != code {
			t.Errorf("POST %s without a content type: %d, want %d", path, w.Code, code)
		}
	}
}
