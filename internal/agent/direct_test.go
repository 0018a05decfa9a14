package agent

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/hutchdev/hutch/internal/agent/agentpb/process"
	"github.com/hutchdev/hutch/internal/runtime/agentclient"
)

// forEachPath runs test against an agent whose commands, run one at a time,
// take its direct slot, and against one that runs every command under a
// shim; configure sets the agent up for either.
func forEachPath(t *testing.T, test func(t *testing.T, configure func(*Config))) {
	t.Run("direct", func(t *testing.T) { test(t, func(*Config) {}) })
	t.Run("shim", func(t *testing.T) { test(t, func(c *Config) { c.noDirect = true }) })
}

// readPids reads the process's stdout until it has printed n pids.
func (s *started) readPids(t testing.TB, n int) []int {
	t.Helper()
	var out strings.Builder
	for len(strings.Fields(out.String())) < n || !strings.HasSuffix(out.String(), "\n") {
		ev, ok, err := s.receive()
		if !ok {
			t.Fatalf("stream ended after %q: %v", out.String(), err)
		}
		out.Write(ev.GetData().GetStdout())
	}
	return parsePids(t, out.String())
}

// ranDirect reports whether a command whose parent is ppid ran in the
// agent's direct slot; otherwise its parent must be a shim, the agent's
// child.
func ranDirect(t testing.TB, ppid int) bool {
	t.Helper()
	if ppid == os.Getpid() {
		return true
	}
	// A shim may be gone already: the end of a command comes once its
	// output is read to EOF, which the shim's exit can be.
	if e, ok := readProcStat(ppid); ok && e.ppid != os.Getpid() {
		t.Fatalf("the command's parent %d is neither the agent nor a shim", ppid)
	}
	return false
}

// waitNoZombies waits until the agent (this process) has no zombie child.
func waitNoZombies(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		procs, err := scanProcs()
		if err != nil {
			t.Fatal(err)
		}
		var zombies []int
		for _, p := range procs {
			if p.ppid == os.Getpid() && p.state == 'Z' {
				zombies = append(zombies, p.pid)
			}
		}
		if len(zombies) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("zombie children left: %v", zombies)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The first command takes the direct slot, a second one started meanwhile a
// shim; both end as they should and leave no zombie.
func TestDirectSlotThenShim(t *testing.T) {
	a := startAgent(t)
	first := a.start(t, sh(`echo $PPID; exec sleep 1000`))
	second := a.start(t, sh(`echo $PPID; exec sleep 1000`))
	if !ranDirect(t, first.readPids(t, 1)[0]) {
		t.Error("the first command ran under a shim")
	}
	if ranDirect(t, second.readPids(t, 1)[0]) {
		t.Error("the second command ran in the taken direct slot")
	}
	if list := a.list(t); len(list) != 2 {
		t.Errorf("List = %v", list)
	}
	a.kill(t, pidSelector(first.pid))
	a.kill(t, pidSelector(second.pid))
	for _, p := range []*started{first, second} {
		if res := p.wait(t); res.end.GetStatus() != "signal: killed" {
			t.Errorf("end = %v", res.end)
		}
	}
	waitGone(t, []int{int(first.pid), int(second.pid)})
	waitNoZombies(t)
}

// Exit statuses, signals, stdin and Connect of a command in the direct slot.
func TestDirectSlotEnd(t *testing.T) {
	a := startAgent(t)
	for _, tt := range []struct {
		name, script, input, status string
		code                        int32
		exited                      bool
		signal                      process.Signal
	}{
		{name: "exit code", script: "exit 3", status: "exit status 3", code: 3, exited: true},
		{name: "killed by itself", script: "kill -9 $$", status: "signal: killed", code: -1},
		{name: "SIGTERM", script: "exec sleep 1000", status: "signal: terminated", code: -1, signal: process.Signal_SIGNAL_SIGTERM},
		{name: "SIGKILL", script: "exec sleep 1000", status: "signal: killed", code: -1, signal: process.Signal_SIGNAL_SIGKILL},
		{name: "stdin", script: "exit $x", input: "7\n", status: "exit status 7", code: 7, exited: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// It waits for its stdin to end, so that Connect finds it running.
			p := a.start(t, sh("echo $PPID; read x; "+tt.script))
			if !ranDirect(t, p.readPids(t, 1)[0]) {
				t.Fatal("ran under a shim")
			}
			conn, err := a.process.Connect(t.Context(), connect.NewRequest(&process.ConnectRequest{Process: pidSelector(p.pid)}))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = conn.Close() }()
			if !conn.Receive() || conn.Msg().GetEvent().GetStart().GetPid() != p.pid {
				t.Fatalf("Connect's first event %v, %v", conn.Msg(), conn.Err())
			}
			if tt.input != "" {
				_, err = a.process.SendInput(t.Context(), connect.NewRequest(&process.SendInputRequest{
					Process: pidSelector(p.pid), Input: &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: []byte(tt.input)}},
				}))
			} else {
				_, err = a.process.CloseStdin(t.Context(), connect.NewRequest(&process.CloseStdinRequest{Process: pidSelector(p.pid)}))
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.signal != process.Signal_SIGNAL_UNSPECIFIED {
				if _, err := a.process.SendSignal(t.Context(), connect.NewRequest(&process.SendSignalRequest{Process: pidSelector(p.pid), Signal: tt.signal})); err != nil {
					t.Fatal(err)
				}
			}
			res := p.wait(t)
			e := res.end
			if e.GetStatus() != tt.status || e.GetExitCode() != tt.code || e.GetExited() != tt.exited || e.Error != nil {
				t.Errorf("end = %v, want status %q, exit code %d, exited %v", e, tt.status, tt.code, tt.exited)
			}
			var end *process.ProcessEvent_EndEvent
			for conn.Receive() {
				if ev := conn.Msg().GetEvent().GetEnd(); ev != nil {
					end = ev
				}
			}
			if end.GetStatus() != tt.status {
				t.Errorf("Connect's end = %v, %v", end, conn.Err())
			}
			waitNoZombies(t)
		})
	}
}

// A command that leaves a process behind keeps the direct slot taken until
// that process ends; then the next command takes it again.
func TestDirectSlotFreesWhenTreeEnds(t *testing.T) {
	a := startAgent(t)
	res := a.run(t, sh(`sleep 0.5 >/dev/null 2>&1 & echo $PPID $!`))
	got := parsePids(t, res.stdout.String())
	if len(got) != 2 || res.end.GetStatus() != "exit status 0" {
		t.Fatalf("stdout %q, end %v", res.stdout.String(), res.end)
	}
	killOnCleanup(t, got[1:])
	if !ranDirect(t, got[0]) {
		t.Fatal("the first command ran under a shim")
	}
	if !alive(got[1]) {
		t.Fatal("the background process is not running")
	}
	if a.runsDirect(t) {
		t.Error("a command took the direct slot while the last one's leftover ran")
	}
	waitGone(t, got[1:]) // and reaped
	a.waitDirectSlot(t)
	waitNoZombies(t)
}

// runsDirect reports whether a command started now runs in the direct slot.
func (a *testAgent) runsDirect(t testing.TB) bool {
	t.Helper()
	res := a.run(t, sh("echo $PPID"))
	return ranDirect(t, parsePids(t, res.stdout.String())[0])
}

// waitDirectSlot waits until commands run in the direct slot again: the
// last tree is gone, which the agent sees once the reaper has reaped it.
func (a *testAgent) waitDirectSlot(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !a.runsDirect(t) {
		if time.Now().After(deadline) {
			t.Fatal("the direct slot stayed taken after its tree ended")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Killing the command in the direct slot, by SIGKILL or at its timeout, kills
// what it left in a new session or double-forked, and nothing of a command
// running under a shim meanwhile; and the other way round.
func TestDirectAndShimTreesApart(t *testing.T) {
	// Prints its parent's pid, then those of the processes it leaves.
	const leaver = `echo $PPID
setsid sh -c 'echo $$; exec sleep 1000' &
(sh -c 'echo $$; exec sleep 1000' &)
sleep 0.1; echo; exec sleep 1000`
	for _, tt := range []struct {
		name    string
		direct  bool // end the direct command, else the shim's
		timeout bool // by its timeout, else by SIGKILL
	}{
		{name: "SIGKILL direct", direct: true},
		{name: "SIGKILL shim"},
		{name: "timeout direct", direct: true, timeout: true},
		{name: "timeout shim", timeout: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := startAgent(t)
			target := 1
			if tt.direct {
				target = 0
			}
			var cmds []*started // direct, shim
			var trees [][]int
			for i := range 2 {
				var p *started
				if tt.timeout && i == target {
					// Timeouts are Hutch's: its service starts this one.
					cmd := shCmd(leaver)
					cmd.Timeout, cmd.KillGrace = 300*time.Millisecond, -1
					p = a.startCmd(t, cmd)
				} else {
					p = a.start(t, sh(leaver))
				}
				pids := p.readPids(t, 3)
				killOnCleanup(t, pids[1:])
				if ranDirect(t, pids[0]) != (i == 0) {
					t.Fatalf("command %d: direct = %v", i, i != 0)
				}
				cmds = append(cmds, p)
				trees = append(trees, append(pids[1:], int(p.pid)))
			}
			other := 1 - target

			if !tt.timeout {
				a.kill(t, pidSelector(cmds[target].pid))
			}
			res := cmds[target].wait(t)
			wantErr := ""
			if tt.timeout {
				wantErr = "timeout"
			}
			if res.end.GetStatus() != "signal: killed" || res.end.GetError() != wantErr {
				t.Errorf("end = %v", res.end)
			}
			waitGone(t, trees[target])
			for _, pid := range trees[other] {
				if !alive(pid) {
					t.Errorf("process %d of the other command died", pid)
				}
			}
			if list := a.list(t); len(list) != 1 || list[0].GetPid() != cmds[other].pid {
				t.Errorf("List = %v", list)
			}

			a.kill(t, pidSelector(cmds[other].pid))
			cmds[other].wait(t)
			waitGone(t, trees[other])
			waitNoZombies(t)
			// Both trees are gone: the next command takes the direct slot.
			a.waitDirectSlot(t)
		})
	}
}

func TestTreeOf(t *testing.T) {
	// 1 is the agent, 2 a shim; 3 the direct command with a child 4 and a
	// re-parented orphan 5; 6 runs under the shim; 7 is outside (ppid 0).
	procs := []procEntry{
		{pid: 1, ppid: 0}, {pid: 2, ppid: 1}, {pid: 3, ppid: 1}, {pid: 4, ppid: 3},
		{pid: 5, ppid: 1, state: 'Z'}, {pid: 6, ppid: 2}, {pid: 8, ppid: 6}, {pid: 7, ppid: 0},
	}
	got := treeOf(procs, 1, func(pid int) bool { return pid == 2 })
	var pids []string
	for _, p := range got {
		pids = append(pids, fmt.Sprint(p.pid))
	}
	if s := strings.Join(pids, " "); s != "3 4 5" {
		t.Errorf("tree = %s, want 3 4 5", s)
	}
}

// A SIGKILL answers once the command is dropped: a second one right after
// finds nothing to kill (E2B's SDK tells false), also when the tree had
// children, which the reaper reaps after the command's own exit.
func TestKillTwice(t *testing.T) {
	a := startAgent(t)
	for i := range 5 {
		p := a.start(t, sh(`sleep 100 & sleep 100 & echo $PPID; wait`))
		if !ranDirect(t, p.readPids(t, 1)[0]) {
			t.Fatal("ran under a shim")
		}
		a.kill(t, pidSelector(p.pid))
		_, err := a.process.SendSignal(t.Context(), connect.NewRequest(&process.SendSignalRequest{Process: pidSelector(p.pid), Signal: process.Signal_SIGNAL_SIGKILL}))
		if connect.CodeOf(err) != connect.CodeNotFound {
			t.Fatalf("round %d: the second kill: %v; want not found", i, err)
		}
		p.wait(t)
	}
}

// A command starts with the signals SendSignal sends at their defaults,
// even where the agent's own process was started ignoring them: go test
// under nohup, or as a shell's background job, where a shell command could
// not even trap SIGHUP, and TestAgentSignal's SIGHUP never arrived. The
// check runs in a child of the test started that way.
func TestCommandSignalsNotIgnored(t *testing.T) {
	if os.Getenv("HUTCH_TEST_IGNORING") == "" {
		requireRoot(t)
		t.Parallel()
		child := exec.CommandContext(t.Context(), "/bin/sh", "-c", `trap '' INT QUIT; exec nohup "$0" -test.run '^TestCommandSignalsNotIgnored$' -test.count 1`, os.Args[0])
		child.Env = append(os.Environ(), "HUTCH_TEST_IGNORING=1")
		out, err := child.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "commands' SigIgn: ") {
			t.Errorf("the test under nohup: %v\n%s", err, out)
		}
		return
	}
	if ignoredSignals()&(1<<(syscall.SIGHUP-1)) == 0 {
		t.Fatalf("started to ignore SIGHUP, the test process does not (SigIgn %x)", ignoredSignals())
	}
	forEachPath(t, func(t *testing.T, path func(*Config)) {
		a := startAgent(t, path)
		res := a.runCmd(t, agentclient.Command{Argv: []string{"grep", "^SigIgn:", "/proc/self/status"}})
		_, hex, _ := strings.Cut(strings.TrimSpace(res.stdout.String()), "\t")
		mask, err := strconv.ParseUint(hex, 16, 64)
		if err != nil {
			t.Fatalf("SigIgn of a command: %q: %v", res.stdout.String(), err)
		}
		for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT} {
			if mask&(1<<(sig-1)) != 0 {
				t.Errorf("a command starts ignoring %v (SigIgn %s)", sig, hex)
			}
		}
		fmt.Printf("commands' SigIgn: %s\n", hex)
	})
}
