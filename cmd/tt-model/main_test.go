package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// buildTool compiles this command into a temp dir.
func buildTool(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "tt-model")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

// TestSignalsCancelBlockedCommands: a command blocked on a peer that never
// answers (here `weights pull` against a Hub that accepts the connection
// and stays silent) ends on the first SIGINT through its context, and a
// FIFO given as a manifest is refused instead of blocking the open.
func TestSignalsCancelBlockedCommands(t *testing.T) {
	bin := buildTool(t)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // hold the connection open, say nothing
		}
	}()

	cmd := exec.Command(bin, "weights", "pull", "../../models/rf-detr/tt-model.yaml")
	cmd.Env = append(os.Environ(), "HF_ENDPOINT=http://"+ln.Addr().String(), "HF_HOME="+t.TempDir(), "HF_HUB_CACHE=", "HF_HUB_OFFLINE=")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // let it connect and block on the answer
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatalf("weights pull exited 0 after SIGINT:\n%s", out.String())
		}
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("weights pull ignored SIGINT while blocked on a silent Hub:\n%s", out.String())
	}

	fifo := filepath.Join(t.TempDir(), "tt-model.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := exec.CommandContext(ctx, bin, "validate", fifo).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatal("validate blocked on a FIFO")
	}
	if err == nil || !strings.Contains(string(res), "not a regular file") {
		t.Fatalf("validate FIFO: %v\n%s", err, res)
	}
}
