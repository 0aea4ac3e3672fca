// Command robotbench drives a pi0.5 server with closed-loop robots (package robots): for each
// robot count of --robots, per robot the latency p50 / p99, completed requests, its device and its
// 503 (and how fast it came), per device the batch sizes, and whether every admitted robot held
// the server's SLO; a table, and JSON with --json.
//
// Example:
//
//	PI05_SLO_MS=800 TT_CPU_DEVICES=2 tt-model-server --model pi05 &
//	go run ./tools/robotbench --url http://127.0.0.1:8000 --robots 2,3 --duration 60s --json robots.json
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ttmodel/tt-model/tools/robotbench/robots"
)

func main() {
	var o robots.Options
	var counts, jsonOut string
	flag.StringVar(&o.URL, "url", "http://127.0.0.1:8000", "the pi0.5 server")
	flag.StringVar(&counts, "robots", "2", "robot counts to run, one session each, e.g. 4,5")
	flag.DurationVar(&o.Duration, "duration", 30*time.Second, "length of each session")
	flag.DurationVar(&o.Think, "think", 0, "a robot's pause between an answer and its next request")
	flag.IntVar(&o.Cameras, "cameras", 0, "images per request (default: the server's PI05_NUM_IMAGES from /info)")
	flag.IntVar(&o.Side, "side", 224, "the side of the square frames sent (base64 PNG)")
	flag.StringVar(&jsonOut, "json", "", "write the sessions as JSON to this file")
	flag.Parse()
	for _, f := range strings.Split(counts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "robotbench: --robots %q: want positive counts, e.g. 4,5\n", counts)
			os.Exit(2)
		}
		o.Robots = append(o.Robots, n)
	}
	o.Progress = os.Stderr
	sessions, err := robots.Run(context.Background(), o, os.Stdout)
	if err == nil && jsonOut != "" {
		var b []byte
		if b, err = json.MarshalIndent(sessions, "", "  "); err == nil {
			err = os.WriteFile(jsonOut, append(b, '\n'), 0o644)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "robotbench:", err)
		os.Exit(1)
	}
}
