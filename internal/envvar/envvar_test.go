package envvar

import (
	"strings"
	"testing"
	"time"
)

func TestReader(t *testing.T) {
	env := map[string]string{
		"N": "7", "N_BAD": "x", "N_HIGH": "11",
		"F": "1.5", "F_NAN": "NaN", "F_LOW": "0.5",
		"MS": "2.5", "MS_HUGE": "1e10", "S": "3", "S_NEG": "-1",
		"C": "b", "C_BAD": "z",
	}
	r := New(func(k string) string { return env[k] })
	for _, tc := range []struct {
		name      string
		got, want any
	}{
		{"Int set", r.Int("N", 1, 0, 10), 7},
		{"Int unset", r.Int("N_UNSET", 1, 0, 10), 1},
		{"Int not a number", r.Int("N_BAD", 1, 0, 10), 1},
		{"Int out of range", r.Int("N_HIGH", 1, 0, 10), 1},
		{"Float set", r.Float("F", 1, 1), 1.5},
		{"Float NaN", r.Float("F_NAN", 1, 1), 1.0},
		{"Float below", r.Float("F_LOW", 1, 1), 1.0},
		{"Millis set", r.Millis("MS", time.Millisecond, 0), 2500 * time.Microsecond},
		{"Millis huge", r.Millis("MS_HUGE", time.Millisecond, 0), time.Millisecond},
		{"Seconds set", r.Seconds("S", time.Second, 0), 3 * time.Second},
		{"Seconds negative", r.Seconds("S_NEG", time.Second, 0), time.Second},
		{"Choice set", r.Choice("C", "a", "a", "b"), "b"},
		{"Choice bad", r.Choice("C_BAD", "a", "a", "b"), "a"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	r.Bad("A=%q and B contradict", "1")
	msg := r.Err().Error()
	for _, want := range []string{
		`N_BAD="x": want an integer in 0..10`,
		`N_HIGH="11": want an integer in 0..10`,
		`F_NAN="NaN": want a number >= 1`,
		`F_LOW="0.5": want a number >= 1`,
		`MS_HUGE="1e10": want milliseconds >= 0`,
		`S_NEG="-1": want seconds >= 0`,
		`C_BAD="z": want one of a, b`,
		`A="1" and B contradict`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("errors lack %q:\n%s", want, msg)
		}
	}
	if n := strings.Count(msg, "\n") + 1; n != 8 {
		t.Errorf("%d errors, want 8:\n%s", n, msg)
	}
	if err := New(func(string) string { return "" }).Err(); err != nil {
		t.Errorf("nothing set: %v", err)
	}
}
