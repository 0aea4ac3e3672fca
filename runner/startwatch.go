package runner

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/ttmodel/tt-model/internal/readiness"
	"github.com/ttmodel/tt-model/supervisor"
)

// tailLines is how many of a crashed server's last lines a CrashError shows.
const tailLines = 20

// CrashError says a server crashed while serve waited for it to be ready,
// with its last lines (the life that ended, as far as the output tells).
type CrashError struct {
	Instance *Instance
	Why      string   // what showed the crash: the supervisor backing off, the engine restarting, …
	Lines    []string // the server's last lines, oldest first
	// Stopped says serve stopped and removed the instance after the crash
	// (unless --keep): its logs went with it.
	Stopped bool
}

func (e *CrashError) Error() string {
	i := e.Instance
	var b strings.Builder
	fmt.Fprintf(&b, "%s crashed while starting: %s", i.Name, e.Why)
	if len(e.Lines) > 0 {
		b.WriteString("\nthe server's last lines:")
		for _, l := range e.Lines {
			b.WriteString("\n  | " + l)
		}
	}
	if e.Stopped {
		b.WriteString("\nit was stopped and removed rather than left restarting (serve --keep leaves it, with its logs)")
		return b.String()
	}
	fmt.Fprintf(&b, "\nall of its output: tt-model logs %s --profile %s --runner %s", i.Package, i.Profile, i.Runner)
	fmt.Fprintf(&b, "\nit keeps being restarted until you stop it: tt-model stop %s --profile %s --runner %s", i.Package, i.Profile, i.Runner)
	return b.String()
}

// startWatcher passes a starting server's output through to w, watching it
// for the kind's ready line (readiness.Watcher, the one ready-line rule),
// and reads it line by line for the supervisor's own lines (a server
// spawned, exited, a backoff or failure: a crash loop), keeping the
// server's lines since it was last spawned for a CrashError.
type startWatcher struct {
	ready *readiness.Watcher
	out   io.Writer   // w, through ready's stream
	crash chan string // receives once: the supervisor backs off or gives up

	mu        sync.Mutex
	partial   []byte
	life      []string // the server's lines since the last spawn (at most tailLines)
	lastLife  []string // the lines of the server's previous life
	crashDone bool
	crashed   []string // the life that ended, as it was when the crash was seen
}

func newStartWatcher(w io.Writer, readyLine string) *startWatcher {
	ready := readiness.NewWatcher(readyLine)
	return &startWatcher{ready: ready, out: ready.Stream(w), crash: make(chan string, 1)}
}

func (sw *startWatcher) Write(p []byte) (int, error) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	n, err := sw.out.Write(p)
	sw.partial = append(sw.partial, p...)
	for {
		i := bytes.IndexByte(sw.partial, '\n')
		if i < 0 {
			break
		}
		sw.line(strings.TrimRight(string(sw.partial[:i]), "\r"))
		sw.partial = sw.partial[i+1:]
	}
	return n, err
}

func (sw *startWatcher) line(l string) {
	msg, detail, ok := supervisor.LogFields(l)
	switch {
	case ok && msg == supervisor.LogStarting:
		sw.lastLife, sw.life = sw.life, nil
		return
	case ok && (msg == supervisor.LogState(supervisor.StateBackoff) || msg == supervisor.LogState(supervisor.StateFailed)):
		if !sw.crashDone {
			sw.crashDone = true
			sw.crashed = sw.lastLines()
			what := "the supervisor restarts it"
			if msg == supervisor.LogState(supervisor.StateFailed) {
				what = "the supervisor gave up"
			}
			sw.crash <- what + " (" + detail + ")"
		}
		return
	case ok && (msg == supervisor.LogSpawned || msg == supervisor.LogExited || strings.HasPrefix(msg, "state ")):
		return // the supervisor's own lines, not the server's
	}
	sw.life = append(sw.life, l)
	if len(sw.life) > tailLines {
		sw.life = sw.life[len(sw.life)-tailLines:]
	}
}

// lastLines are the server's lines of its current life when it wrote any,
// else those of the life before.
func (sw *startWatcher) lastLines() []string {
	if len(sw.life) == 0 {
		return sw.lastLife
	}
	return append([]string{}, sw.life...)
}

// crashError reports the crash with the last lines of the server's life that
// ended: frozen when the supervisor's backoff was seen (the next life's
// output may already follow), else the latest.
func (sw *startWatcher) crashError(inst *Instance, why string) *CrashError {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	lines := sw.crashed
	if lines == nil {
		lines = sw.lastLines()
	}
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		out = append(out, readableLine(l))
	}
	return &CrashError{Instance: inst, Why: why, Lines: out}
}

// readableLine shows a slog line's quoted err value unquoted (a multi-line
// error is easier to read as lines); other lines are kept as they are.
func readableLine(l string) string {
	msg, _, ok := supervisor.LogFields(l)
	if !ok {
		return l
	}
	if e, ok := supervisor.LogValue(l, "err"); ok && strings.Contains(e, "\n") {
		return msg + ": " + strings.ReplaceAll(e, "\n", "\n  | ")
	}
	return l
}
