package backendtest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/backend"
)

// testPause freezes a sandbox: its agent answers nothing, and a counter
// its process writes stands still, until Unpause; a restarted backend
// finds it paused.
func (s *suite) testPause(t *testing.T) {
	pauser, ok := s.backend.(backend.Pauser)
	if !ok {
		t.Skip("the backend does not pause sandboxes")
	}
	sb := s.create(t)
	// A counter ticking in the background, outliving its command.
	// Renamed into place, so that a read never sees it half-written.
	sb.mustSh(t, `(i=0; while :; do i=$((i+1)); echo $i > /tmp/tick.new; mv /tmp/tick.new /tmp/tick; sleep 0.02; done) >/dev/null 2>&1 &`)
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	if err := pauser.Pause(ctx, sb.handle); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	hctx, hcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err := sb.agent.Health(hctx)
	hcancel()
	if err == nil {
		t.Error("the agent of a paused sandbox answered")
	}
	// A restarted daemon recovers it, paused.
	if err := s.h.New(t).Recover(ctx, sb.handle); err != nil {
		t.Errorf("Recover of a paused sandbox: %v", err)
	}
	if err := pauser.Unpause(ctx, sb.handle); err != nil {
		t.Fatalf("Unpause: %v", err)
	}
	sb.agent.CloseIdleConnections()
	tick := func() int {
		n, err := strconv.Atoi(strings.TrimSpace(sb.mustSh(t, "cat /tmp/tick")))
		if err != nil {
			t.Fatalf("the counter: %v", err)
		}
		return n
	}
	// Running, the counter moves; paused, it stands still (but for the
	// ticks while the pause and the reads around it take effect, which a
	// loaded host stretches: the windows are long beside them).
	const window = time.Second
	before := tick()
	time.Sleep(window)
	running := tick() - before
	if err := pauser.Pause(ctx, sb.handle); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	time.Sleep(window)
	if err := pauser.Unpause(ctx, sb.handle); err != nil {
		t.Fatalf("Unpause: %v", err)
	}
	paused := tick() - before - running
	if running < 5 || paused > running/2 {
		t.Errorf("counter ticks in %v: %d running, %d paused; want it to stand still paused", window, running, paused)
	}
}

// testSuspend stops a sandbox keeping its files: suspended, its agent is
// gone; resumed, its files are as they were and its processes gone; a
// suspended sandbox can be destroyed.
func (s *suite) testSuspend(t *testing.T) {
	suspender, ok := s.backend.(backend.Suspender)
	if !ok {
		t.Skip("the backend does not suspend sandboxes")
	}
	sb := s.create(t)
	// A shell holding a value in its memory only, which it writes out on
	// SIGUSR1; and a sleep.
	sb.mustSh(t, `echo kept > ~/note; sleep 600 >/dev/null 2>&1 & echo $! > ~/pid
		sh -c 'v=$$-$(date +%N); trap "echo \$v > ~/said" USR1; echo "$v" > ~/value; while :; do sleep 0.1; done' >/dev/null 2>&1 &
		echo $! > ~/holder; while [ ! -s ~/value ]; do sleep 0.01; done`)
	if r := sb.shAsRoot(t, "echo root-kept > /etc/hutch-note"); r.exitCode != 0 {
		t.Fatalf("write /etc as root: %+v", r)
	}
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	if err := suspender.Suspend(ctx, sb.handle, true); err != nil {
		t.Fatalf("Suspend: %v", err)
	}
	sb.agent.CloseIdleConnections()
	hctx, hcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err := sb.agent.Health(hctx)
	hcancel()
	if err == nil {
		t.Fatal("the agent of a suspended sandbox answered")
	}
	if !s.listed(t, s.backend, sb.handle.ID) {
		t.Error("a suspended sandbox is not listed: a restart would destroy it")
	}
	if err := suspender.Resume(ctx, sb.handle, sb.spec); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	// By its command line: its pid may be another process's now.
	out := sb.mustSh(t, `cat ~/note /etc/hutch-note; [ "$(tr '\0' ' ' < /proc/$(cat ~/pid)/cmdline 2>/dev/null)" = "sleep 600 " ] && echo alive || echo gone`)
	want := "kept\nroot-kept\ngone\n"
	if s.h.KeepsProcesses {
		want = "kept\nroot-kept\nalive\n"
	}
	if out != want {
		t.Errorf("after Resume: %q, want %q", out, want)
	}
	if s.h.KeepsProcesses {
		// The value was in the holder's memory only.
		said := sb.mustSh(t, `kill -USR1 $(cat ~/holder); i=0; while [ ! -s ~/said ] && [ $i -lt 500 ]; do sleep 0.01; i=$((i+1)); done; cat ~/said ~/value`)
		if lines := strings.Split(said, "\n"); len(lines) < 2 || lines[0] == "" || lines[0] != lines[1] {
			t.Errorf("the value held in memory across Suspend and Resume: said, then stored: %q", said)
		}
	}
	if host := strings.TrimSpace(sb.mustSh(t, "hostname")); s.h.Isolates && host != sb.spec.Hostname {
		t.Errorf("resumed with hostname %q, want %q", host, sb.spec.Hostname)
	}
	// Suspended keeping no memory (a stop), twice: the files stay, the
	// processes go under every runtime. Then destroyed by the cleanup.
	sb.mustSh(t, `sleep 600 >/dev/null 2>&1 & echo $! > ~/pid`)
	for range 2 {
		if err := suspender.Suspend(ctx, sb.handle, false); err != nil {
			t.Fatalf("Suspend without memory: %v", err)
		}
	}
	if err := suspender.Resume(ctx, sb.handle, sb.spec); err != nil {
		t.Fatalf("Resume after a Suspend without memory: %v", err)
	}
	out = sb.mustSh(t, `cat ~/note; [ "$(tr '\0' ' ' < /proc/$(cat ~/pid)/cmdline 2>/dev/null)" = "sleep 600 " ] && echo alive || echo gone`)
	if out != "kept\ngone\n" {
		t.Errorf("after a Suspend without memory and Resume: %q, want the file kept and the process gone", out)
	}
}
