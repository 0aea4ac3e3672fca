package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// chipHost finds and checks Tenstorrent chips through /dev and sysfs only.
// It never opens a device node: opening can re-initialise a hung chip.
type chipHost struct {
	devDir   string // /dev/tenstorrent
	sysfsDir string // /sys/class/tenstorrent
}

// heartbeat reads chip id's tt_heartbeat. ok is false when the attribute is
// absent (a driver without telemetry); a detached or resetting chip gives an
// error (ENODEV / ENODATA), a dead PCIe link the all-ones value.
func (h chipHost) heartbeat(id int) (value string, ok bool, err error) {
	path := filepath.Join(h.sysfsDir, fmt.Sprintf("tenstorrent!%d", id), "tt_heartbeat")
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		if _, dirErr := os.Stat(filepath.Dir(path)); dirErr == nil {
			return "", false, nil
		}
	}
	if err != nil {
		return "", false, fmt.Errorf("chip %d: read %s: %w", id, path, err)
	}
	v := strings.TrimSpace(string(b))
	switch strings.ToLower(v) {
	case "0xffffffff", "4294967295", "ffffffff":
		return "", false, fmt.Errorf("chip %d: %s reads all ones (link down)", id, path)
	}
	return v, true, nil
}

// check waits (up to timeout) until every chip's device node is back and
// its firmware heartbeat advances over interval. It returns the last reason
// a chip failed.
func (h chipHost) check(ctx context.Context, chips []int, interval, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		err := h.checkOnce(ctx, chips, interval)
		if err == nil {
			return nil
		}
		if last == nil || ctx.Err() == nil { // keep the reason, not the deadline that cut a retry short
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("chips not healthy after %s: %w", timeout, last)
		case <-time.After(interval / 4):
		}
	}
}

func (h chipHost) checkOnce(ctx context.Context, chips []int, interval time.Duration) error {
	first := make(map[int]string, len(chips))
	for _, id := range chips {
		node := filepath.Join(h.devDir, strconv.Itoa(id))
		if _, err := os.Stat(node); err != nil {
			return fmt.Errorf("chip %d: device node: %w", id, err)
		}
		v, ok, err := h.heartbeat(id)
		if err != nil {
			return err
		}
		if ok {
			first[id] = v
		}
	}
	if len(first) == 0 {
		return nil // no heartbeat attributes: the device nodes are all we can see
	}
	select {
	case <-ctx.Done():
		return fmt.Errorf("heartbeat check: %w", ctx.Err())
	case <-time.After(interval):
	}
	for _, id := range chips {
		before, had := first[id]
		if !had {
			continue
		}
		now, _, err := h.heartbeat(id)
		if err != nil {
			return err
		}
		if now == before {
			return fmt.Errorf("chip %d: tt_heartbeat stuck at %s over %s", id, now, interval)
		}
	}
	return nil
}
