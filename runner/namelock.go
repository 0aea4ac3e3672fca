package runner

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// LockInstance serializes the start of one instance name across processes
// and runners: two `tt-model serve` of the same package and profile (one on
// the Docker engine, one with --host, or two at once) take this lock around
// "is it running? start it", so the second one sees the first and is
// refused (exit 3) instead of racing it. The lock is an flock on
// <cacheRoot>/run/.<name>.lock, freed by the kernel if serve dies. It waits
// for a holder, saying so on progress.
func LockInstance(cacheRoot, name string, progress io.Writer) (unlock func(), err error) {
	dir := filepath.Join(cacheRoot, "run")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("instance lock: %w", err)
	}
	path := filepath.Join(dir, "."+name+".lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("instance lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		fmt.Fprintf(progress, "another tt-model is starting %s; waiting for it\n", name)
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			f.Close()
			return nil, fmt.Errorf("instance lock %s: %w", path, err)
		}
	}
	return func() { f.Close() }, nil
}
