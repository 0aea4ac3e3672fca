// Command testserver plays a model server for the supervisor's tests: it
// becomes ready after a delay (GET /health answers {"status":"ok"}, and/or a
// log line), exits with a chosen code, hangs at start, ignores SIGTERM,
// spawns orphans, and appends what happens to it to a record file, one
// event a line, so that a test can check the order of events across starts.
//
// -plan gives one action per start (the start number is the count of
// "start" lines already in the record), the last one repeating:
//
//	ready     become ready and serve until a signal
//	exit:N    become ready, then exit N after -exit-after
//	early:N   exit N at once, never ready
//	hang      never become ready
package main

import (
	"bufio"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "orphan-parent" {
		orphanParent(os.Args[2:])
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "orphan-child" {
		d, _ := time.ParseDuration(os.Args[2])
		time.Sleep(d)
		return
	}
	started := time.Now()
	var (
		port       = flag.Int("port", 0, "HTTP port for /health (0: no HTTP)")
		readyAfter = flag.Duration("ready-after", 0, "delay before ready")
		readyLine  = flag.String("ready-line", "", "line printed on stdout when ready")
		plan       = flag.String("plan", "ready", "comma-separated action per start")
		exitAfter  = flag.Duration("exit-after", 0, "for exit:N, how long to stay ready")
		ignoreTerm = flag.Bool("ignore-term", false, "ignore SIGTERM")
		termExit   = flag.Int("term-exit", 0, "exit code on SIGTERM")
		orphans    = flag.Int("orphans", 0, "orphans to leave behind once ready")
		orphanLife = flag.Duration("orphan-life", 100*time.Millisecond, "how long each orphan lives")
		healthFile = flag.String("unhealthy-if", "", "answer /health 503 while this file exists")
		record     = flag.String("record", "", "file to append events to")
		envDump    = flag.String("env-dump", "", "file to write the environment to")
	)
	flag.Parse()
	rec := recorder{path: *record}
	n := rec.count("start")
	rec.add("start %d %d", os.Getpid(), started.UnixNano())
	if *envDump != "" {
		env := os.Environ()
		sort.Strings(env)
		os.WriteFile(*envDump, []byte(strings.Join(env, "\n")+"\n"), 0o644)
	}
	actions := strings.Split(*plan, ",")
	action := actions[min(n, len(actions)-1)]
	kind, arg, _ := strings.Cut(action, ":")
	code, _ := strconv.Atoi(arg)
	exit := func(code int) {
		rec.add("exit %d %d", code, time.Now().UnixNano())
		os.Exit(code)
	}

	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGQUIT)
	go func() {
		for s := range sigs {
			rec.add("signal %s", signalName(s))
			if s == syscall.SIGTERM && !*ignoreTerm {
				exit(*termExit)
			}
		}
	}()

	if kind == "early" {
		exit(code)
	}
	var ready atomic.Bool
	if *port != 0 {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port))
		if err != nil {
			fmt.Fprintln(os.Stderr, "testserver:", err)
			exit(2)
		}
		http.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {
			ok := ready.Load()
			if _, err := os.Stat(*healthFile); *healthFile != "" && err == nil {
				ok = false
			}
			w.Header().Set("Content-Type", "application/json")
			if !ok {
				rec.add("health 503")
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprint(w, `{"status":"starting"}`)
				return
			}
			fmt.Fprint(w, `{"status":"ok"}`)
		})
		go http.Serve(ln, nil)
	}
	if kind == "hang" {
		select {}
	}
	time.Sleep(*readyAfter)
	rec.add("ready")
	ready.Store(true)
	if *readyLine != "" {
		fmt.Printf("some output first\n%s\n", *readyLine)
	}
	if *orphans > 0 {
		self, _ := os.Executable()
		cmd := exec.Command(self, "orphan-parent", strconv.Itoa(*orphans), orphanLife.String())
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "testserver: orphans:", err)
		}
		rec.add("orphans %d", *orphans)
	}
	if kind == "exit" {
		time.Sleep(*exitAfter)
		exit(code)
	}
	select {}
}

// orphanParent starts n children that outlive it: they are reparented to
// the nearest subreaper, a PID 1 supervisor in the tests.
func orphanParent(args []string) {
	n, _ := strconv.Atoi(args[0])
	self, _ := os.Executable()
	for range n {
		exec.Command(self, "orphan-child", args[1]).Start()
	}
}

type recorder struct{ path string }

func (r recorder) add(format string, args ...any) {
	if r.path == "" {
		return
	}
	f, err := os.OpenFile(r.path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, format+"\n", args...)
}

func (r recorder) count(prefix string) int {
	f, err := os.Open(r.path)
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), prefix+" ") {
			n++
		}
	}
	return n
}

func signalName(s os.Signal) string {
	switch s {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGUSR1:
		return "SIGUSR1"
	case syscall.SIGUSR2:
		return "SIGUSR2"
	case syscall.SIGQUIT:
		return "SIGQUIT"
	}
	return s.String()
}
