// Command hutch is the Hutch daemon, its command line and its in-sandbox agent.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/hutchdev/hutch/internal/app/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
