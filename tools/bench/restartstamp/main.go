// Command restartstamp is the server of tools/bench/restart-peer.sh: a
// program that only exits 75 (a hang, to tt-model supervise), stamping the
// wall clock first thing in main and again just before the exit, so that a
// restarter's exit-to-next-start latency can be read off one file whoever
// restarts it (tt-model supervise on the host, or Docker's restart policy
// with the file bind-mounted into a container). Built with CGO_ENABLED=0 it
// runs FROM scratch.
//
//	restartstamp FILE
//
// appends "start <unix ns>" and "exit <unix ns>" to FILE.
package main

import (
	"fmt"
	"os"
	"time"
)

// hangExit is the exit status tt-model supervise handles as a hang.
const hangExit = 75

func main() {
	started := time.Now()
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: restartstamp FILE")
		os.Exit(2)
	}
	f, err := os.OpenFile(os.Args[1], os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintf(os.Stderr, "restartstamp: %v\n", err)
		os.Exit(2)
	}
	// One write per line: O_APPEND keeps each line whole.
	if _, err := fmt.Fprintf(f, "start %d\n", started.UnixNano()); err != nil {
		fmt.Fprintf(os.Stderr, "restartstamp: write %s: %v\n", os.Args[1], err)
		os.Exit(2)
	}
	if _, err := fmt.Fprintf(f, "exit %d\n", time.Now().UnixNano()); err != nil {
		fmt.Fprintf(os.Stderr, "restartstamp: write %s: %v\n", os.Args[1], err)
		os.Exit(2)
	}
	f.Close()
	os.Exit(hangExit)
}
