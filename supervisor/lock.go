package supervisor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ChipBusyError says another process holds a chip's lock.
type ChipBusyError struct {
	Chip int
	PID  string // as the holder wrote it; "unknown" when unreadable
	Path string
}

func (e *ChipBusyError) Error() string {
	return fmt.Sprintf("chip %d is in use by PID %s (lock %s): another supervisor runs a server on it",
		e.Chip, e.PID, e.Path)
}

// chipLocks are exclusive flock(2) locks, one file per chip, held for the
// supervisor's life so that two servers never share a chip. The kernel
// drops them when the process dies, so a stale file never blocks.
type chipLocks struct {
	files []*os.File
}

// lockChips takes every chip's lock or none of them.
func lockChips(dir string, chips []int) (*chipLocks, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("lock dir: %w", err)
	}
	l := &chipLocks{}
	for _, id := range chips {
		path := filepath.Join(dir, fmt.Sprintf("tt-model-chip-%d.lock", id))
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			l.release()
			return nil, fmt.Errorf("chip %d lock: %w", id, err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			l.release()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, &ChipBusyError{Chip: id, PID: lockHolder(path), Path: path}
			}
			return nil, fmt.Errorf("chip %d lock %s: %w", id, path, err)
		}
		l.files = append(l.files, f)
		if err := f.Truncate(0); err == nil {
			f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0) //nolint:errcheck // the PID is a courtesy
		}
	}
	return l, nil
}

func lockHolder(path string) string {
	b, err := os.ReadFile(path)
	if pid := strings.TrimSpace(string(b)); err == nil && pid != "" {
		return pid
	}
	return "unknown"
}

// inherited are the lock files every server gets as fds 3, 4, …: an flock
// belongs to the open file, so a chip stays locked while any process of the
// supervisor's (the server, anything it forked) still runs, even after the
// supervisor itself was killed.
func (l *chipLocks) inherited() []*os.File {
	if l == nil {
		return nil
	}
	return l.files
}

func (l *chipLocks) release() {
	for _, f := range l.files {
		f.Close()
	}
	l.files = nil
}
