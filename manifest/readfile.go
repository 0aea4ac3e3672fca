package manifest

import (
	"fmt"
	"io"
	"os"
)

// MaxFileBytes bounds a manifest file (tt-model.yaml or the wire
// tt_kernel_manifest.json): real ones are a few KiB, so a larger one is a
// mistake (a log, a checkpoint), not something to buffer in memory.
const MaxFileBytes = 4 << 20

// readRegular reads a manifest file: only a regular file (following
// symlinks) of at most MaxFileBytes. A FIFO, a device such as /dev/zero or
// a socket is refused before it is opened, since reading one can block
// forever or never end.
func readRegular(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s)", st.Mode().Type())
	}
	if st.Size() > MaxFileBytes {
		return nil, fmt.Errorf("%d bytes is larger than a manifest can be (%d)", st.Size(), MaxFileBytes)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// The file may have grown since Stat: read one byte past the limit to see.
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("larger than a manifest can be (%d bytes)", MaxFileBytes)
	}
	return data, nil
}
