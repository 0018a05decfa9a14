package exec_test

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/internal/core/create"
	"github.com/hutchdev/hutch/internal/core/exec"
)

// A service run by /bin/sh -c is a shell and the server it started, which
// the shell's end does not end: a restart ends both before it starts the
// service again, and a stop ends both, also when they ignore SIGTERM (then
// after the grace).
func TestServiceRestartEndsTheOldTree(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, command string
	}{
		{name: "ends on SIGTERM", command: "sleep 600 & echo $!; wait"},
		{name: "ignores SIGTERM", command: "trap '' TERM; sleep 600 & echo $!; wait"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, s := start(t)
			ctx := t.Context()
			sb := c.Create(t, create.Options{})
			svc, err := s.StartService(ctx, sb.ID, exec.ServiceRequest{ProcessRequest: exec.ProcessRequest{
				Name: "web", Command: tt.command, Cwd: c.Workspace(sb.ID), Port: 1,
			}})
			if err != nil {
				t.Fatal(err)
			}
			shell, server := svc.Pid, serverPid(t, s, sb.ID)

			again, err := s.RestartService(ctx, sb.ID, "web")
			if err != nil {
				t.Fatal(err)
			}
			if alive(int(shell)) || alive(server) {
				t.Errorf("after the restart the old shell (%v) or server (%v) runs", alive(int(shell)), alive(server))
			}
			shell, server = again.Pid, serverPid(t, s, sb.ID)
			if !alive(int(shell)) || !alive(server) {
				t.Fatalf("the restarted shell (%v) or server (%v) does not run", alive(int(shell)), alive(server))
			}

			if stopped, err := s.StopService(ctx, sb.ID, "web"); err != nil || stopped.Status != exec.ServiceStopped {
				t.Fatalf("stop: %+v, %v", stopped, err)
			}
			if alive(int(shell)) || alive(server) {
				t.Errorf("after the stop the shell (%v) or server (%v) runs", alive(int(shell)), alive(server))
			}
			if err := s.DeleteService(ctx, sb.ID, "web"); err != nil {
				t.Fatal(err)
			}
			if err := c.M.Delete(ctx, sb.ID); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// serverPid waits for the service's current run to print its server's pid.
func serverPid(t *testing.T, s *exec.Service, id string) int {
	t.Helper()
	var pid int
	waitFor(t, "the server's pid", func() bool {
		var err error
		pid, err = strconv.Atoi(strings.TrimSpace(logsOf(t, s, id, "web")))
		return err == nil
	})
	return pid
}

// alive reports whether pid runs: it exists and is not a zombie.
func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] != 'Z'
}
