// Command pause is the sandbox ("pause") container of the test node
// (internal/testing/kubetest): it holds the pod's namespaces open, reaps
// the zombies it inherits as PID 1, and exits on SIGTERM or SIGINT. The
// node builds it statically and pushes it to its own registry, as no
// registry.k8s.io is reachable.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sig {
		if s != syscall.SIGCHLD {
			return
		}
		for {
			var ws syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}
