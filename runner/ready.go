package runner

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/ttmodel/tt-model/internal/readiness"
	"github.com/ttmodel/tt-model/manifest"
)

// NotReadyError means the server did not become ready in time; it may
// still be booting.
type NotReadyError struct {
	Instance *Instance
	Timeout  time.Duration
}

func (e *NotReadyError) Error() string {
	return fmt.Sprintf("%s is not ready after %s; it keeps starting: follow it with `tt-model logs %s -f`, or `tt-model stop %s --profile %s`",
		e.Instance.Name, e.Timeout, e.Instance.Package, e.Instance.Package, e.Instance.Profile)
}

// WaitReady follows the instance's output to logOut until the server is
// ready (package readiness: its ReadyPath answers JSON "status":"ok", or its
// ReadyLine shows in the output), the instance stops or crash-loops
// (*CrashError), or the timeout passes (*NotReadyError).
func WaitReady(ctx context.Context, r Runner, inst *Instance, l manifest.Launch, timeout time.Duration, logOut io.Writer) error {
	ready, err := watchStart(ctx, r, inst, l, timeout, logOut)
	if err == nil && !ready {
		return &NotReadyError{Instance: inst, Timeout: timeout}
	}
	return err
}

// WatchStart watches a detached start for up to window: it returns early,
// ready, when the server is ready, and a *CrashError when it crashes
// meanwhile (a server that cannot start mostly fails in its first seconds);
// ready is false when the window passed with the server still starting.
func WatchStart(ctx context.Context, r Runner, inst *Instance, l manifest.Launch, window time.Duration) (ready bool, err error) {
	return watchStart(ctx, r, inst, l, window, io.Discard)
}

// watchStart is WaitReady's loop; it returns ready=false, err=nil when limit
// passed.
func watchStart(ctx context.Context, r Runner, inst *Instance, l manifest.Launch, limit time.Duration, logOut io.Writer) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	watcher := newStartWatcher(logOut, l.ReadyLine)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = r.Logs(ctx, inst, true, watcher)
	}()
	// Stop following before returning, so no log line lands after the card.
	defer wg.Wait()
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	url := inst.URL() + l.ReadyPath
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-watcher.ready.Seen():
			return true, nil
		case why := <-watcher.crash:
			return false, watcher.crashError(inst, why)
		case <-ctx.Done():
			if ctx.Err() == context.DeadlineExceeded {
				return false, nil
			}
			return false, fmt.Errorf("interrupted while waiting; %s keeps starting: `tt-model logs %s -f`, `tt-model stop %s --profile %s`",
				inst.Name, inst.Package, inst.Package, inst.Profile)
		case <-tick.C:
		}
		if l.ReadyLine == "" && l.ReadyPath != "" && readiness.Probe(ctx, client, url) == nil {
			return true, nil
		}
		cur, err := r.Find(ctx, inst.Name)
		if ctx.Err() == context.DeadlineExceeded {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if cur == nil {
			return false, fmt.Errorf("%s disappeared while starting", inst.Name)
		}
		if !cur.Running {
			return false, watcher.crashError(inst, fmt.Sprintf("stopped while starting (state %s, exit code %d)", cur.State, cur.ExitCode))
		}
		if cur.Restarts > inst.Restarts || cur.State == "restarting" {
			// The supervisor inside restarts the server itself; the engine
			// restarting the container means the supervisor gave up (or
			// the image has no supervisor).
			return false, watcher.crashError(inst, "exited and the engine restarts it")
		}
	}
}
