// Command pause is the test cluster's pod sandbox image: it holds a pod's
// namespaces and does nothing until it is told to stop. The cluster has
// no registry to pull Kubernetes' own pause image from.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
}
