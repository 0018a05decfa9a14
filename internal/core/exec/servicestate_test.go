package exec

import "testing"

// A service started again with the pid of its last run (a new PID
// namespace after a resume hands out the same small pids) is starting
// again, not running: what was seen of the last run's port is forgotten.
func TestNewRunForgetsReadinessOfTheSamePid(t *testing.T) {
	s := &Service{}
	st, _ := s.state("sb", "web", 23, ServiceStarting)
	s.states.mu.Lock()
	st.ready = true
	s.states.mu.Unlock()
	if again, _ := s.state("sb", "web", 23, ServiceStarting); !again.ready {
		t.Fatal("the same run lost its readiness")
	}
	s.newRun("sb", "web", 23)
	if again, _ := s.state("sb", "web", 23, ServiceStarting); again.ready {
		t.Error("a new run with the old pid is taken as ready: a preview would not wait for its port")
	}
}
