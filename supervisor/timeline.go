package supervisor

import (
	"fmt"
	"time"

	"github.com/ttmodel/tt-model/internal/hangmarker"
)

// The status board's timeline: what happened to the server and its chips,
// in order, for the operator who opens the status page after a night of
// restarts. The board records an entry whenever the state, the last exit or
// the last reset changes, and the supervisor notes the hang marker and the
// chip checks. The newest timelineLength entries are kept.

const timelineLength = 200

// The kinds of timeline entries.
const (
	EventState  = "state"  // the state machine moved (starting, ready, resetting, …)
	EventExit   = "exit"   // the server ended
	EventMarker = "marker" // the hang marker was written or removed
	EventReset  = "reset"  // a chip reset ended
	EventCheck  = "check"  // the post-reset chip check ended
)

// Event is one entry of the timeline.
type Event struct {
	At     time.Time `json:"at"`
	Kind   string    `json:"kind"`
	State  State     `json:"state,omitempty"` // state: the new state
	Detail string    `json:"detail"`
	PID    int       `json:"pid,omitempty"`  // state starting: the server's pid
	Code   *int      `json:"code,omitempty"` // exit: the exit code (128+n for signal n)
	OK     *bool     `json:"ok,omitempty"`   // reset, check
	// DurationS and Output are a reset's: how long it took, and the tail of
	// the reset command's output.
	DurationS float64 `json:"duration_s,omitempty"`
	Output    string  `json:"output,omitempty"`
}

// record adds the entries that an update from before to b.st means. The
// caller holds mu.
func (b *statusBoard) record(before Status) {
	st := &b.st
	if !st.Since.Equal(before.Since) {
		e := Event{At: st.Since, Kind: EventState, State: st.State, Detail: st.Detail}
		if st.State == StateStarting {
			e.PID = st.ServerPID
		}
		b.add(e)
	}
	if x := st.LastExit; x != nil && x != before.LastExit {
		code := x.Code
		detail := fmt.Sprintf("exit %d", code)
		if x.Signal != "" {
			detail = "killed by " + x.Signal
		}
		if code == HangExitCode {
			detail += " (hang: the chips are reset before the next start)"
		}
		b.add(Event{At: x.At, Kind: EventExit, Detail: detail, Code: &code})
	}
	if r := st.LastReset; r != nil && r != before.LastReset {
		ok := r.OK
		e := Event{At: r.At, Kind: EventReset, Detail: r.summary(), OK: &ok, DurationS: r.DurationS, Output: r.Output}
		b.add(e)
		if !r.Skipped {
			st.Resets++
		}
	}
}

// note adds an entry the supervisor reports itself (marker, check).
func (b *statusBoard) note(e Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e.At.IsZero() {
		e.At = time.Now()
	}
	b.add(e)
	b.save()
}

// add appends e, dropping the oldest entries beyond timelineLength. The
// caller holds mu.
func (b *statusBoard) add(e Event) {
	if len(b.st.Timeline) >= timelineLength {
		b.st.Timeline = append(b.st.Timeline[:0:0], b.st.Timeline[len(b.st.Timeline)-timelineLength+1:]...)
	}
	b.st.Timeline = append(b.st.Timeline, e)
}

// Outcome is how the page colours the entry: "good", "bad" or "" (neutral).
func (e Event) Outcome() string {
	switch {
	case e.OK != nil && *e.OK:
		return "good"
	case e.OK != nil:
		return "bad"
	case e.Kind == EventExit && *e.Code != 0, e.Kind == EventState && e.State == StateFailed:
		return "bad"
	case e.Kind == EventState && e.State == StateReady:
		return "good"
	}
	return ""
}

// summary is a reset in one line.
func (r *ResetInfo) summary() string {
	if r.Skipped {
		return "reset skipped (" + r.Reason + "): no chips on this host and the default reset command"
	}
	s := fmt.Sprintf("reset after %s: ", r.Reason)
	switch {
	case r.OK:
		s += "done"
	case r.Error != "":
		s += "failed: " + r.Error
	default:
		s += "failed"
	}
	s += fmt.Sprintf(", %d attempt", r.Attempts)
	if r.Attempts != 1 {
		s += "s"
	}
	if r.ChipCheck != "" {
		s += "; chip check " + r.ChipCheck
	}
	return s
}

// noteCheck records a chip check's outcome.
func (s *Supervisor) noteCheck(err error) {
	ok := err == nil
	detail := s.chipsName() + " answer again (heartbeat advancing)"
	if err != nil {
		detail = err.Error()
	}
	s.board.note(Event{Kind: EventCheck, Detail: detail, OK: &ok})
}

// clearMarker removes the hang marker (after a good reset) and notes it.
func (s *Supervisor) clearMarker() {
	present := hangmarker.Exists(s.cfg.HangMarker)
	if err := hangmarker.Remove(s.cfg.HangMarker); err != nil {
		s.log.Error("cannot remove the hang marker", "err", err)
		return
	}
	if present {
		ok := true
		s.board.note(Event{Kind: EventMarker, Detail: "hang marker removed: " + s.cfg.HangMarker, OK: &ok})
	}
}
