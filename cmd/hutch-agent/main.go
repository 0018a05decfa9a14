// Command hutch-agent is the in-sandbox agent on its own: what runs as PID 1
// of every sandbox, importing only what runs there. make build embeds it in
// hutch (package agentexe), whose daemon bind-mounts it into each sandbox
// as /.hutch/hutch and starts it as `/.hutch/hutch agent --listen-fd 3`, the
// command line hutch itself answers too.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/hutchdev/hutch/internal/agent"
)

func main() {
	if len(os.Args) < 2 || os.Args[1] != "agent" {
		fmt.Fprintln(os.Stderr, "hutch-agent is Hutch's in-sandbox agent: the daemon starts it in every sandbox as `hutch-agent agent --listen-fd N`")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := agent.Main(ctx, os.Args[2:], os.Stderr)
	stop()
	os.Exit(code)
}
