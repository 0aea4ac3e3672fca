package supervisor

import (
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// outputTail passes a child's output on to dst (the supervisor's stderr, as
// before) and keeps its last tailBytes for the status page: what the reset
// command said is what an operator wants to read after a failed reset.
type outputTail struct {
	w    *os.File // the child's stdout and stderr
	done chan struct{}

	mu  sync.Mutex
	buf []byte
	cut bool // buf lost its beginning
}

const tailBytes = 4 << 10

func newOutputTail(dst io.Writer) (*outputTail, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	t := &outputTail{w: w, done: make(chan struct{})}
	go func() {
		defer close(t.done)
		defer r.Close()
		chunk := make([]byte, 32<<10)
		for {
			n, err := r.Read(chunk)
			if n > 0 {
				_, _ = dst.Write(chunk[:n])
				t.mu.Lock()
				t.buf = append(t.buf, chunk[:n]...)
				if len(t.buf) > tailBytes {
					t.buf, t.cut = append(t.buf[:0], t.buf[len(t.buf)-tailBytes:]...), true
				}
				t.mu.Unlock()
			}
			if err != nil {
				return
			}
		}
	}()
	return t, nil
}

// started closes the supervisor's copy of the write end once the child
// holds its own.
func (t *outputTail) started() { t.w.Close() }

// text is the tail once the output ended; a child of the command that
// keeps the pipe open is waited for a second at most.
func (t *outputTail) text() string {
	select {
	case <-t.done:
	case <-time.After(time.Second):
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s := string(t.buf)
	if t.cut {
		if i := strings.IndexByte(s, '\n'); i >= 0 { // start at a whole line
			s = s[i+1:]
		}
	}
	return strings.TrimRight(s, "\n")
}
