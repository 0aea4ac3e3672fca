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
	code := commands.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
