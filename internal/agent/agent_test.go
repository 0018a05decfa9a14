package agent

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/hutchdev/hutch/internal/agent/agentpb/filesystem/filesystemconnect"
	"github.com/hutchdev/hutch/internal/agent/agentpb/process"
	"github.com/hutchdev/hutch/internal/agent/agentpb/process/processconnect"
	"github.com/hutchdev/hutch/internal/runtime/agentclient"
)

// TestMain lets the test binary be the shim too: the agent under test starts
// /proc/self/exe agent shim …, as `hutch agent shim` would.
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "agent" && os.Args[2] == "shim" {
		os.Exit(Shim(os.Args[3:]))
	}
	os.Exit(m.Run())
}

const testUID = 1000

type testAgent struct {
	// client is the daemon's typed client (Hutch's service); process and fs
	// are envd's services as an E2B SDK calls them, their errors Connect's.
	client  *agentclient.Client
	process processconnect.ProcessClient
	fs      filesystemconnect.FilesystemClient
	socket  string
	home    string // the default user's home, owned by uid 1000
	root    string // root's home
	dial    func(ctx context.Context) (net.Conn, error)
	stop    func() error // stops the agent and returns what Run returned
}

func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the agent runs commands as other users and chowns files: needs root")
	}
}

// startAgent runs an agent in-process on a temporary socket, with a passwd
// file that has root and user (uid 1000, home in a temporary directory).
func startAgent(t testing.TB, configure ...func(*Config)) *testAgent {
	t.Helper()
	requireRoot(t)
	base := t.TempDir()
	// uid 1000 must be able to reach its home.
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	home := filepath.Join(base, "home")
	root := filepath.Join(base, "root")
	for _, d := range []string{home, root} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(home, testUID, testUID); err != nil {
		t.Fatal(err)
	}
	passwd := filepath.Join(base, "passwd")
	group := filepath.Join(base, "group")
	writeFile(t, passwd, fmt.Sprintf("root:x:0:0:root:%s:/bin/sh\nuser:x:%d:%d::%s:/bin/sh\n", root, testUID, testUID, home))
	writeFile(t, group, fmt.Sprintf("root:x:0:\nuser:x:%d:\n", testUID))

	// Socket paths are short (108 bytes): keep it out of the test's TempDir.
	sockDir, err := os.MkdirTemp("", "hutch-agent")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(sockDir) })
	socket := filepath.Join(sockDir, "agent.sock")

	// Reaping orphans as PID 1 does (Run makes the test process a child
	// subreaper meanwhile) enables the direct slot.
	cfg := Config{Socket: socket, PasswdFile: passwd, GroupFile: group, reapOrphans: true}
	if os.Getenv("HUTCH_TEST_AGENT_LOG") != "" {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	for _, f := range configure {
		f(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	var once sync.Once
	stop := func() error {
		var err error
		once.Do(func() {
			cancel()
			err = <-done
		})
		return err
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	})

	dial := func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) }}}
	a := &testAgent{
		client:  agentclient.New(dial),
		process: processconnect.NewProcessClient(hc, "http://agent"),
		fs:      filesystemconnect.NewFilesystemClient(hc, "http://agent"),
		socket:  socket, home: home, root: root, dial: dial, stop: stop,
	}
	t.Cleanup(a.client.CloseIdleConnections)
	t.Cleanup(hc.CloseIdleConnections)
	deadline := time.Now().Add(5 * time.Second)
	for a.client.Health(context.Background()) != nil {
		if time.Now().After(deadline) {
			t.Fatal("agent did not become healthy")
		}
		time.Sleep(time.Millisecond)
	}
	return a
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// sh is a Start request running script with /bin/sh -c.
func sh(script string) *connect.Request[process.StartRequest] {
	return connect.NewRequest(&process.StartRequest{Process: &process.ProcessConfig{Cmd: "/bin/sh", Args: []string{"-c", script}}})
}

// shCmd is a Command running script with /bin/sh -c, for Hutch's service.
func shCmd(script string) agentclient.Command {
	return agentclient.Command{Argv: []string{"/bin/sh", "-c", script}}
}

// asUser makes an envd request act as user, as envd's clients do.
func asUser[T any](req *connect.Request[T], user string) *connect.Request[T] {
	req.Header().Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user+":")))
	return req
}

// message is what a Connect error says, without its code.
func message(err error) string {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce.Message()
	}
	return fmt.Sprint(err)
}

type result struct {
	pid        uint32
	stdout     bytes.Buffer
	stderr     bytes.Buffer
	end        *process.ProcessEvent_EndEvent
	exit       *agentclient.ExitStatus // when started through Hutch's service
	keepalives int
}

// run starts a process through envd's Start and collects everything it
// streams.
func (a *testAgent) run(t testing.TB, req *connect.Request[process.StartRequest]) *result {
	t.Helper()
	res, err := a.tryRun(t.Context(), req)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	return res
}

func (a *testAgent) tryRun(ctx context.Context, req *connect.Request[process.StartRequest]) (*result, error) {
	stream, err := a.process.Start(ctx, req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = stream.Close() }()
	res := &result{}
	for stream.Receive() {
		collect(res, stream.Msg().GetEvent())
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	if res.end == nil {
		return res, errors.New("stream ended without an end event")
	}
	return res, nil
}

// runCmd runs cmd through Hutch's service and collects what it streams.
func (a *testAgent) runCmd(t testing.TB, cmd agentclient.Command) *result {
	t.Helper()
	res, err := a.tryRunCmd(t.Context(), cmd)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	return res
}

func (a *testAgent) tryRunCmd(ctx context.Context, cmd agentclient.Command) (*result, error) {
	exe, err := a.client.Start(ctx, cmd)
	if err != nil {
		return nil, err
	}
	defer func() { _ = exe.Close() }()
	res, err := (&started{pid: exe.Pid, exe: exe}).rest(nil)
	if err == nil && res.end == nil {
		return res, errors.New("stream ended without an end event")
	}
	return res, err
}

func collect(res *result, ev *process.ProcessEvent) {
	switch e := ev.GetEvent().(type) {
	case *process.ProcessEvent_Start:
		res.pid = e.Start.GetPid()
	case *process.ProcessEvent_Data:
		res.stdout.Write(e.Data.GetStdout())
		res.stderr.Write(e.Data.GetStderr())
	case *process.ProcessEvent_End:
		res.end = e.End
	case *process.ProcessEvent_Keepalive:
		res.keepalives++
	}
}

// started is a process whose stream the test reads step by step: envd's
// Start stream, or an Execution of Hutch's service, whose events it reads
// in envd's shape.
type started struct {
	pid    uint32
	stream *connect.ServerStreamForClient[process.StartResponse]
	exe    *agentclient.Execution
	exit   *agentclient.ExitStatus // the exe's, once read
}

func (a *testAgent) start(t testing.TB, req *connect.Request[process.StartRequest]) *started {
	t.Helper()
	stream, err := a.process.Start(t.Context(), req)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { _ = stream.Close() })
	if !stream.Receive() {
		t.Fatalf("no start event: %v", stream.Err())
	}
	pid := stream.Msg().GetEvent().GetStart().GetPid()
	if pid == 0 {
		t.Fatalf("first event is not a start event: %v", stream.Msg())
	}
	return &started{pid: pid, stream: stream}
}

// startCmd starts cmd through Hutch's service.
func (a *testAgent) startCmd(t testing.TB, cmd agentclient.Command) *started {
	t.Helper()
	exe, err := a.client.Start(t.Context(), cmd)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { _ = exe.Close() })
	return &started{pid: exe.Pid, exe: exe}
}

// receive returns the stream's next event; false at its end.
func (s *started) receive() (*process.ProcessEvent, bool, error) {
	if s.exe == nil {
		if !s.stream.Receive() {
			return nil, false, s.stream.Err()
		}
		return s.stream.Msg().GetEvent(), true, nil
	}
	ev, err := s.exe.Recv()
	switch {
	case errors.Is(err, io.EOF):
		return nil, false, nil
	case err != nil:
		return nil, false, err
	case ev.Exit != nil:
		s.exit = ev.Exit
		end := &process.ProcessEvent_EndEvent{ExitCode: int32(ev.Exit.Code), Exited: ev.Exit.Exited, Status: ev.Exit.Status} // #nosec G115 -- an exit code
		if ev.Exit.TimedOut {
			timeout := "timeout"
			end.Error = &timeout
		}
		return &process.ProcessEvent{Event: &process.ProcessEvent_End{End: end}}, true, nil
	case ev.Stream == agentclient.Stderr:
		return &process.ProcessEvent{Event: &process.ProcessEvent_Data{Data: &process.ProcessEvent_DataEvent{Output: &process.ProcessEvent_DataEvent_Stderr{Stderr: ev.Data}}}}, true, nil
	default:
		return &process.ProcessEvent{Event: &process.ProcessEvent_Data{Data: &process.ProcessEvent_DataEvent{Output: &process.ProcessEvent_DataEvent_Stdout{Stdout: ev.Data}}}}, true, nil
	}
}

// readLine reads the process's stdout up to a newline.
func (s *started) readLine(t testing.TB) string {
	t.Helper()
	var buf bytes.Buffer
	for !bytes.Contains(buf.Bytes(), []byte("\n")) {
		ev, ok, err := s.receive()
		if !ok {
			t.Fatalf("stream ended before a line (%q): %v", buf.String(), err)
		}
		buf.Write(ev.GetData().GetStdout())
	}
	return strings.TrimSpace(buf.String())
}

// rest reads the rest of the stream, calling each, when not nil, after
// each event.
func (s *started) rest(each func(*result)) (*result, error) {
	res := &result{pid: s.pid}
	for {
		ev, ok, err := s.receive()
		if err != nil {
			return nil, err
		}
		if !ok {
			res.exit = s.exit
			return res, nil
		}
		collect(res, ev)
		if each != nil {
			each(res)
		}
	}
}

// wait reads the rest of the stream, to the end event.
func (s *started) wait(t testing.TB) *result {
	t.Helper()
	res, err := s.rest(nil)
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	if res.end == nil {
		t.Fatal("stream ended without an end event")
	}
	return res
}

func pidSelector(pid uint32) *process.ProcessSelector {
	return &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}}
}

func (a *testAgent) kill(t testing.TB, sel *process.ProcessSelector) {
	t.Helper()
	_, err := a.process.SendSignal(context.WithoutCancel(t.Context()), connect.NewRequest(&process.SendSignalRequest{
		Process: sel, Signal: process.Signal_SIGNAL_SIGKILL,
	}))
	if err != nil {
		t.Errorf("kill %v: %v", sel, err)
	}
}

// parsePids reads whitespace-separated pids.
func parsePids(t testing.TB, s string) []int {
	t.Helper()
	var pids []int
	for _, f := range strings.Fields(s) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("bad pid %q in %q", f, s)
		}
		pids = append(pids, pid)
	}
	return pids
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	e, ok := readProcStat(pid)
	return ok && e.state != 'Z'
}

// killOnCleanup SIGKILLs pids at the end of the test, in case it failed
// before the agent did.
func killOnCleanup(t testing.TB, pids []int) {
	t.Cleanup(func() {
		for _, pid := range pids {
			_ = killIfChildOfShim(pid)
		}
	})
}

// killIfChildOfShim kills pid unless it was reused by something else: it
// must be a sleep.
func killIfChildOfShim(pid int) error {
	comm, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil || strings.TrimSpace(string(comm)) != "sleep" {
		return nil
	}
	return syscall.Kill(pid, syscall.SIGKILL)
}

// waitGone waits until none of pids exists any more (zombies count as
// existing: their shim must reap them).
func waitGone(t testing.TB, pids []int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var left []int
		for _, pid := range pids {
			if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
				left = append(left, pid)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes %v still exist", left)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A service's handler is built at its first request, once, however many
// requests come at once.
func TestBuiltOnFirstCall(t *testing.T) {
	var builds atomic.Int32
	h := builtOnFirstCall(func() http.Handler {
		builds.Add(1)
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	})
	if n := builds.Load(); n != 0 {
		t.Fatalf("built %d times before any request", n)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/process.Process/Start", nil))
			if rec.Code != http.StatusTeapot {
				t.Errorf("status %d, want the built handler's %d", rec.Code, http.StatusTeapot)
			}
		})
	}
	wg.Wait()
	if n := builds.Load(); n != 1 {
		t.Errorf("built %d times for 8 requests, want 1", n)
	}
}
