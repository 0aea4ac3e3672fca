// Package journallog is slog's text format for a program that systemd may
// run as a service: when its stderr is the journal's stream, each line
// starts with the syslog priority of its level ("<4>" for a warning, as
// sd-daemon(3) defines SD_WARNING), which journald strips and stores as the
// entry's PRIORITY, so `journalctl -p warning` finds the warnings. Anywhere
// else the lines are slog's text format unchanged.
package journallog

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"

	"github.com/coreos/go-systemd/v22/journal"
)

// Handler is slog's text handler on w. When w is this process's stderr and
// systemd connected that to the journal (JOURNAL_STREAM names its device
// and inode, the check sd-daemon documents: a child that inherited the
// variable but writes to a pipe must not prefix), each line gets its
// priority prefix. A malformed JOURNAL_STREAM is reported as the error,
// with the plain handler.
func Handler(w io.Writer, opts *slog.HandlerOptions) (slog.Handler, error) {
	if w != io.Writer(os.Stderr) {
		return slog.NewTextHandler(w, opts), nil
	}
	stream, err := journal.StderrIsJournalStream()
	if err != nil {
		return slog.NewTextHandler(w, opts), fmt.Errorf("stderr: journal stream check: %w", err)
	}
	if !stream {
		return slog.NewTextHandler(w, opts), nil
	}
	return newPrefixed(w, opts), nil
}

// newPrefixed is slog's text handler on w with each line prefixed by the
// syslog priority of its record's level.
func newPrefixed(w io.Writer, opts *slog.HandlerOptions) slog.Handler {
	out := &prefixWriter{w: w}
	return &prefixed{inner: slog.NewTextHandler(out, opts), out: out}
}

// priority is the syslog priority journald stores for a record of level l:
// debug 7, info 6, warning 4, error 3 (sd-daemon.h's SD_DEBUG, SD_INFO,
// SD_WARNING, SD_ERR). Levels between slog's take the one below them.
func priority(l slog.Level) journal.Priority {
	switch {
	case l >= slog.LevelError:
		return journal.PriErr
	case l >= slog.LevelWarn:
		return journal.PriWarning
	case l >= slog.LevelInfo:
		return journal.PriInfo
	}
	return journal.PriDebug
}

// prefixed hands each record to the text handler while its writer holds
// the record's prefix. The writer (and its lock) is shared by the handlers
// WithAttrs and WithGroup derive, as they share the one stream.
type prefixed struct {
	inner slog.Handler
	out   *prefixWriter
}

func (h *prefixed) Enabled(ctx context.Context, l slog.Level) bool { return h.inner.Enabled(ctx, l) }

func (h *prefixed) Handle(ctx context.Context, r slog.Record) error {
	h.out.mu.Lock()
	defer h.out.mu.Unlock()
	h.out.prefix = fmt.Sprintf("<%d>", priority(r.Level))
	return h.inner.Handle(ctx, r)
}

func (h *prefixed) WithAttrs(as []slog.Attr) slog.Handler {
	return &prefixed{inner: h.inner.WithAttrs(as), out: h.out}
}

func (h *prefixed) WithGroup(name string) slog.Handler {
	return &prefixed{inner: h.inner.WithGroup(name), out: h.out}
}

// prefixWriter writes each line the text handler formats (one Write per
// record) behind the current prefix, in one write so that lines of other
// writers to the stream cannot come between.
type prefixWriter struct {
	mu     sync.Mutex // held by prefixed.Handle across the inner handler's Write
	w      io.Writer
	prefix string
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.buf = append(append(p.buf[:0], p.prefix...), b...)
	if _, err := p.w.Write(p.buf); err != nil {
		return 0, err
	}
	return len(b), nil
}
