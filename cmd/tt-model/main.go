// Command tt-model validates, packages, ships, serves and supervises model
// packages described by a tt-model.yaml. The commands live in package commands.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/ttmodel/tt-model/commands"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	// The first signal cancels ctx and every command winds down through it;
	// once it has, the default action is back, so a second Ctrl-C ends a
	// command that is stuck anyway.
	go func() {
		<-ctx.Done()
		stop()
	}()
	code := commands.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
