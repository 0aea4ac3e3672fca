// Command sleeper stands in for a model server in a container: it prints
// its ready line and waits for SIGTERM.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	fmt.Println("sleeper ready")
	<-sig
}
