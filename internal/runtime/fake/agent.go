package fake

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sync/atomic"
	"syscall"

	"github.com/hutchdev/hutch/internal/agent"
)

// The first argument that makes the test binary a fake sandbox's agent or
// one of its shims (as `hutch agent` and `hutch agent shim` do hutch).
const (
	agentArg = "hutch-fake-agent"
	shimArg  = "hutch-fake-shim"
)

// mainCalled tells Create that the test binary dispatches agentArg: run
// without it, the binary would run its tests again, and start sandboxes of
// its own.
var mainCalled atomic.Bool

// Main runs the fake's agent or one of its shims when the test binary was
// started as one, and returns its exit code and true; otherwise it returns
// false, and the binary goes on to run its tests. The TestMain of every
// package whose tests use the fake calls it first:
//
//	func TestMain(m *testing.M) {
//		if code, ran := fake.Main(); ran {
//			os.Exit(code)
//		}
//		os.Exit(m.Run())
//	}
func Main() (code int, ran bool) {
	mainCalled.Store(true)
	if len(os.Args) < 2 {
		return 0, false
	}
	switch os.Args[1] {
	case agentArg:
		return runAgent(os.Args[2:]), true
	case shimArg:
		return agent.Shim(os.Args[2:]), true
	}
	return 0, false
}

// runAgent serves the agent of the sandbox whose directory is args[0] until
// SIGTERM. It is not PID 1, so every command runs under a shim, which is the
// test binary again: the agent's default shim command would be too, but
// without the argument that makes it one.
func runAgent(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "fake agent: want the sandbox directory as the only argument")
		return 2
	}
	dir := args[0]
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "fake agent: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	err = agent.Run(ctx, agent.Config{
		Socket:     filepath.Join(dir, "agent.sock"),
		Logger:     slog.New(slog.NewTextHandler(os.Stderr, nil)),
		PasswdFile: filepath.Join(dir, "root", "etc", "passwd"),
		GroupFile:  filepath.Join(dir, "root", "etc", "group"),
		Shim:       []string{exe, shimArg},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "fake agent: %v\n", err)
		return 1
	}
	return 0
}
