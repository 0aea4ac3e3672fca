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
// ReadyLine shows in the output), the instance stops, or the timeout passes.
func WaitReady(ctx context.Context, r Runner, inst *Instance, l manifest.Launch, timeout time.Duration, logOut io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	watcher := readiness.NewWatcher(l.ReadyLine)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = r.Logs(ctx, inst, true, watcher.Stream(logOut))
	}()
	// Stop following before returning, so no log line lands after the card.
	defer wg.Wait()
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	url := fmt.Sprintf("http://127.0.0.1:%d%s", inst.Port, l.ReadyPath)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-watcher.Seen():
			return nil
		case <-ctx.Done():
			if ctx.Err() == context.DeadlineExceeded {
				return &NotReadyError{Instance: inst, Timeout: timeout}
			}
			return fmt.Errorf("interrupted while waiting; %s keeps starting: `tt-model logs %s -f`, `tt-model stop %s --profile %s`",
				inst.Name, inst.Package, inst.Package, inst.Profile)
		case <-tick.C:
		}
		if l.ReadyLine == "" && l.ReadyPath != "" && readiness.Probe(ctx, client, url) == nil {
			return nil
		}
		cur, err := r.Find(ctx, inst.Name)
		if ctx.Err() == context.DeadlineExceeded {
			return &NotReadyError{Instance: inst, Timeout: timeout}
		}
		if err != nil {
			return err
		}
		if cur == nil {
			return fmt.Errorf("%s disappeared while starting", inst.Name)
		}
		if !cur.Running {
			return fmt.Errorf("%s stopped while starting (state %s, exit code %d); its output is above", inst.Name, cur.State, cur.ExitCode)
		}
		if cur.Restarts > inst.Restarts {
			// The supervisor inside restarts the server itself; the engine
			// restarting the container means the supervisor gave up.
			return fmt.Errorf("%s exited and the engine restarted it; its output is above. It will keep retrying: `tt-model stop %s --profile %s`",
				inst.Name, inst.Package, inst.Profile)
		}
	}
}
