package exec

import (
	"syscall"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/runtime/agentclient"
	"github.com/hutchdev/hutch/internal/runtime/backend"
)

// How a command ended is reported as a shell and timeout(1) would.
func TestResultOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		exit agentclient.ExitStatus
		want Result
	}{
		{"exited", agentclient.ExitStatus{Code: 3, Exited: true}, Result{ExitCode: 3}},
		{"timed out", agentclient.ExitStatus{Code: -1, TimedOut: true}, Result{ExitCode: 124, TimedOut: true, KilledBy: "timeout"}},
		{"killed", agentclient.ExitStatus{Code: -1, Signal: syscall.SIGKILL}, Result{ExitCode: 137, KilledBy: "signal"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.want.Duration = time.Second
			if got := ResultOf(tc.exit, time.Second); got != tc.want {
				t.Errorf("ResultOf(%+v) = %+v, want %+v", tc.exit, got, tc.want)
			}
		})
	}
}

// A failed command is put down to a limit only when the counts grew.
func TestBlame(t *testing.T) {
	t.Parallel()
	oom := backend.LimitHits{OOMKills: 1}
	pids := backend.LimitHits{PidsMax: 1}
	gvisorOOM := backend.LimitHits{OOMKills: 1, OOMMayFault: true}
	for _, tc := range []struct {
		name      string
		exit      int
		prev, now backend.LimitHits
		want      string
	}{
		{"killed at the memory limit", 137, backend.LimitHits{}, oom, "oom"},
		{"killed, an earlier kill counted", 137, oom, oom, "signal"},
		{"a fault at the OOM kill, under gVisor", 139, backend.LimitHits{}, gvisorOOM, "oom"},
		{"a bus error at the OOM kill, under gVisor", 135, backend.LimitHits{}, gvisorOOM, "oom"},
		{"a fault at the OOM kill, under runc", 139, backend.LimitHits{}, oom, ""},
		{"a fault, no OOM kill, under gVisor", 139, gvisorOOM, gvisorOOM, ""},
		{"a fault at the memory limit, under gVisor", 139, backend.LimitHits{OOMMayFault: true}, backend.LimitHits{OOMMayFault: true, MemoryFull: 3}, "oom"},
		{"a fault at the memory limit, under runc", 139, backend.LimitHits{}, backend.LimitHits{MemoryFull: 3}, ""},
		{"failed at the process limit", 1, backend.LimitHits{}, pids, "pids"},
		{"failed, nothing hit", 1, pids, pids, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := Result{ExitCode: tc.exit}
			if tc.exit == 137 {
				res.KilledBy = "signal"
			}
			res.Blame(tc.prev, tc.now)
			if res.KilledBy != tc.want {
				t.Errorf("Blame(%+v, %+v) of exit %d: killed by %q, want %q", tc.prev, tc.now, tc.exit, res.KilledBy, tc.want)
			}
		})
	}
}
