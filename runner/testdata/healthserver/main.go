// Command healthserver is the model server stand-in of the runner tests: it
// takes tt-model-server's --host/--port flags, prints its HF_MODEL, and
// answers GET /health with {"status":"ok"} only when $HF_MODEL/config.json
// can be read, so a ready server proves the weights mount and the snapshot
// symlinks work where it runs. IGNORE_SIGTERM=1 makes it ignore SIGTERM;
// FAIL_START=<message> makes it print the message and exit 1 at once (a
// server that cannot start); EXIT_AFTER=<duration> makes it exit 3 that
// long after it started (a server the engine keeps restarting). GET /env
// answers its whole environment as a JSON object, so a test can check what
// a runner gave it; --verify answers `tt-model package`'s check of the
// server and exits 0.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func main() {
	host := flag.String("host", "0.0.0.0", "listen address")
	port := flag.Int("port", 8000, "listen port")
	verify := flag.Bool("verify", false, "print the environment's size and exit 0, as tt-model-server --verify does for a build")
	flag.Parse()
	if *verify {
		fmt.Printf("healthserver: verify ok, %d variables\n", len(os.Environ()))
		return
	}
	model := os.Getenv("HF_MODEL")
	fmt.Printf("HF_MODEL=%s\n", model)
	if msg := os.Getenv("FAIL_START"); msg != "" {
		fmt.Fprintln(os.Stderr, "healthserver:", msg)
		os.Exit(1)
	}
	if d, err := time.ParseDuration(os.Getenv("EXIT_AFTER")); err == nil {
		time.AfterFunc(d, func() {
			fmt.Println("exiting 3 after", d)
			os.Exit(3)
		})
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		for s := range sigs {
			if os.Getenv("IGNORE_SIGTERM") == "1" && s == syscall.SIGTERM {
				fmt.Println("ignoring SIGTERM")
				continue
			}
			fmt.Println("stopping on", s)
			os.Exit(0)
		}
	}()
	http.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if _, err := os.ReadFile(filepath.Join(model, "config.json")); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			json.NewEncoder(w).Encode(map[string]string{"status": "loading", "error": err.Error()})
			return
		}
		json.NewEncoder(w).Encode(map[string]string{"status": "ok"})
	})
	http.HandleFunc("/env", func(w http.ResponseWriter, r *http.Request) {
		env := map[string]string{}
		for _, kv := range os.Environ() {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(env)
	})
	l, err := net.Listen("tcp", net.JoinHostPort(*host, fmt.Sprint(*port)))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("listening on", l.Addr())
	if err := http.Serve(l, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
