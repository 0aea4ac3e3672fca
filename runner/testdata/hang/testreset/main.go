// Command test-reset stands in for `tt-smi -r CHIPS` in the hang-chain
// end-to-end test (runner/hang_e2e_test.go). The test bakes it into the base
// image of a test package at /usr/local/bin/test-reset, and the supervisor
// inside the container runs it after the server exits 75.
//
// Usage: test-reset RECORD MARKER [CHIPS]
//
// It appends one JSON line to RECORD (a file under the /cache mount, so the
// test reads it from the host): its argv, the time, and whether the hang
// marker MARKER existed while it ran (the supervisor writes it on the hang
// and may remove it only after a good reset). It exits 0, or 1 when it
// cannot write the record. Static and standard library only: the image has
// no shell and no libc.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"time"
)

type record struct {
	Argv   []string `json:"argv"`
	At     string   `json:"at"`
	Marker bool     `json:"marker"`
}

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: test-reset RECORD MARKER [CHIPS]")
		os.Exit(2)
	}
	_, statErr := os.Stat(os.Args[2])
	line, err := json.Marshal(record{Argv: os.Args, At: time.Now().UTC().Format(time.RFC3339Nano), Marker: statErr == nil})
	if err == nil {
		err = appendLine(os.Args[1], append(line, '\n'))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "test-reset:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "test-reset: recorded %s\n", line)
}

func appendLine(path string, line []byte) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("open record: %w", err)
	}
	if _, err := f.Write(line); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	return nil
}
