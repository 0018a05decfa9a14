package backendtest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
)

// testPause freezes a sandbox: its agent answers nothing, and a counter
// its process writes stands still, until Unpause; a restarted backend
// finds it paused.
func (s *suite) testPause(t *testing.T) {
	pauser := s.backend.Capabilities().Pause
	if pauser == nil {
		t.Skip("the backend does not pause sandboxes")
	}
	sb := s.create(t)
	// A clock ticking in the background, outliving its command: each tick
	// appends the time (the sandbox's clock is the host's).
	sb.mustSh(t, `(while :; do date +%s%N >> /tmp/ticks; sleep 0.02; done) >/dev/null 2>&1 &`)
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
	// Running, the clock ticks; from Pause's return to Unpause's call it
	// does not tick at all. (Counting ticks read before and after would
	// also count those while the reads and the pause take effect, which a
	// loaded host stretches.) A loaded host also slows the clock itself
	// (each tick forks twice): the windows are long enough for it to tick
	// a few times running even then, and none paused.
	const window = 2 * time.Second
	time.Sleep(window)
	began := time.Now()
	if err := pauser.Pause(ctx, sb.handle); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	frozen := time.Now()
	time.Sleep(window)
	thawed := time.Now()
	if err := pauser.Unpause(ctx, sb.handle); err != nil {
		t.Fatalf("Unpause: %v", err)
	}
	var running, paused int
	for _, line := range strings.Fields(sb.mustSh(t, "cat /tmp/ticks")) {
		ns, err := strconv.ParseInt(line, 10, 64)
		if err != nil {
			t.Fatalf("a tick %q: %v", line, err)
		}
		at := time.Unix(0, ns)
		switch {
		case at.After(began.Add(-window)) && at.Before(began):
			running++
		case at.After(frozen.Add(clockSlack)) && at.Before(thawed.Add(-clockSlack)):
			paused++
		}
	}
	if running < 2 || paused > 0 {
		t.Errorf("clock ticks in %v: %d running, %d paused; want it to stand still paused", window, running, paused)
	}

	// A paused sandbox is destroyed, its processes with it, without
	// waiting out a kill that reaches them only once thawed (10 s).
	if err := pauser.Pause(ctx, sb.handle); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	began = time.Now()
	if err := s.backend.Destroy(ctx, sb.handle); err != nil {
		t.Fatalf("Destroy of a paused sandbox: %v", err)
	}
	if took := time.Since(began); took > 8*time.Second {
		t.Errorf("Destroy of a paused sandbox took %v, as long as waiting out a kill of frozen processes", took)
	}
}

// clockSlack is how far a sandbox's clock may read from the host's.
const clockSlack = 10 * time.Millisecond

// testSuspend stops a sandbox keeping its files: suspended, its agent is
// gone; resumed, its files are as they were and its processes gone; a
// suspended sandbox can be destroyed.
func (s *suite) testSuspend(t *testing.T) {
	suspender := s.backend.Capabilities().Suspend
	if suspender == nil {
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
