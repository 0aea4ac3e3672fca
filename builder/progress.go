package builder

import (
	"fmt"
	"io"
	"time"

	"github.com/ttmodel/tt-model/builder/oci"
)

// progress writes what a long operation is doing to stderr: the stage, each
// layer with its sizes, bytes moved. A nil *progress is silent.
type progress struct {
	w     io.Writer
	start time.Time
}

func newProgress(w io.Writer) *progress {
	if w == nil {
		w = io.Discard
	}
	return &progress{w: w, start: time.Now()}
}

func (p *progress) stage(format string, args ...any) {
	if p == nil {
		return
	}
	fmt.Fprintf(p.w, "[%6.1fs] %s\n", time.Since(p.start).Seconds(), fmt.Sprintf(format, args...))
}

func (p *progress) layer(l oci.LayerBlob) {
	if p == nil {
		return
	}
	d, _ := l.Layer.Digest()
	cached := ""
	if l.Cached {
		cached = " (unchanged: from the layer cache)"
	}
	p.stage("layer %s: %s, %d files, %s (%s uncompressed)%s", shortHex(d.Hex), l.Description, l.Files,
		humanBytes(l.Compressed), humanBytes(l.Uncompressed), cached)
}

// writer is where child processes (go build, verify) print.
func (p *progress) writer() io.Writer {
	if p == nil {
		return io.Discard
	}
	return p.w
}

func shortHex(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
