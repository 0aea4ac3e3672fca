package webui

import (
	"testing"
	"time"
)

func TestFormats(t *testing.T) {
	for d, want := range map[time.Duration]string{
		850 * time.Millisecond: "850 ms", 12300 * time.Millisecond: "12.3 s", 245 * time.Second: "4 min 05 s",
		3*time.Hour + 7*time.Minute: "3 h 07 min", 52 * time.Hour: "2 d 04 h",
	} {
		if got := Duration(d); got != want {
			t.Errorf("Duration(%v) = %q, want %q", d, got, want)
		}
	}
	for v, want := range map[float64]string{0.4123: "0.412", 4.123: "4.12", 41.23: "41.2", 412.3: "412"} {
		if got := Millis(v); got != want {
			t.Errorf("Millis(%v) = %q, want %q", v, got, want)
		}
	}
}
