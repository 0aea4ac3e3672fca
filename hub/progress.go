package hub

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// progress draws one aggregate bar for a snapshot download on stderr: redrawn
// in place on a terminal, a line every few seconds otherwise (CI logs).
type progress struct {
	out   io.Writer
	label string
	total int64
	tty   bool
	start time.Time

	mu    sync.Mutex
	files map[string]*atomic.Int64 // bytes on disk per partial file
	wire  atomic.Int64             // bytes received by this process

	stop chan struct{}
	done chan struct{}
}

func newProgress(out io.Writer, label string, total int64) *progress {
	if out == nil {
		out = io.Discard
	}
	p := &progress{
		out: out, label: label, total: total, tty: isTerminal(out), start: time.Now(),
		files: map[string]*atomic.Int64{},
		stop:  make(chan struct{}), done: make(chan struct{}),
	}
	go p.loop()
	return p
}

// track returns the byte counter of one partial file; the bar sums them.
func (p *progress) track(path string) *atomic.Int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.files[path]
	if !ok {
		c = new(atomic.Int64)
		p.files[path] = c
	}
	return c
}

func (p *progress) bytes() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n int64
	for _, c := range p.files {
		n += c.Load()
	}
	return n
}

func (p *progress) loop() {
	defer close(p.done)
	every := 10 * time.Second
	if p.tty {
		every = 250 * time.Millisecond
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.draw(false)
		}
	}
}

// finish stops the redraw loop and prints the final line.
func (p *progress) finish() {
	close(p.stop)
	<-p.done
	p.draw(true)
}

func (p *progress) draw(final bool) {
	n := p.bytes()
	secs := time.Since(p.start).Seconds()
	rate := 0.0
	if secs > 0 {
		rate = float64(n) / secs
	}
	pct := 100.0
	if p.total > 0 {
		pct = 100 * float64(n) / float64(p.total)
	}
	line := fmt.Sprintf("%s %5.1f%% %s / %s  %s/s", p.label, pct, FormatBytes(n), FormatBytes(p.total), FormatBytes(int64(rate)))
	switch {
	case p.tty && final:
		fmt.Fprintf(p.out, "\r\033[K%s\n", line)
	case p.tty:
		fmt.Fprintf(p.out, "\r\033[K%s", line)
	default:
		fmt.Fprintln(p.out, line)
	}
}

// FormatBytes renders a byte count with a binary unit ("1.5 GiB").
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// countingReader adds what it reads to a file's counter and to the total
// received, and calls touch (when set) whenever bytes arrive.
type countingReader struct {
	r          io.Reader
	file, wire *atomic.Int64
	touch      func()
}

func (c countingReader) Read(b []byte) (int, error) {
	k, err := c.r.Read(b)
	c.file.Add(int64(k))
	c.wire.Add(int64(k))
	if k > 0 && c.touch != nil {
		c.touch()
	}
	return k, err
}
