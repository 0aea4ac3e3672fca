// Package envvar reads a server's settings from environment variables:
// typed getters, each with a default for an unset variable and a range, and
// every bad value kept as an error that names the variable, its value and
// what it wants, so one start reports all of them at once.
package envvar

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Reader reads variables through a lookup (os.Getenv in production) and
// collects every problem; Err returns them.
type Reader struct {
	getenv func(string) string
	errs   []error
}

// New is a Reader over getenv.
func New(getenv func(string) string) *Reader { return &Reader{getenv: getenv} }

// Get is the variable's value as set ("" when unset).
func (r *Reader) Get(name string) string { return r.getenv(name) }

// Bad records a problem that no getter catches (two settings that
// contradict each other); the message should name the variables.
func (r *Reader) Bad(format string, args ...any) {
	r.errs = append(r.errs, fmt.Errorf(format, args...))
}

// Err is every problem recorded, joined; nil when there is none.
func (r *Reader) Err() error { return errors.Join(r.errs...) }

// Int reads an integer in lo..hi; def when unset or bad.
func (r *Reader) Int(name string, def, lo, hi int) int {
	v := r.getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		r.Bad("%s=%q: want an integer in %d..%d", name, v, lo, hi)
		return def
	}
	return n
}

// Float reads a finite number >= lo; def when unset or bad.
func (r *Reader) Float(name string, def, lo float64) float64 {
	v := r.getenv(name)
	if v == "" {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < lo {
		r.Bad("%s=%q: want a number >= %g", name, v, lo)
		return def
	}
	return f
}

// Millis reads milliseconds (a number, fractions allowed) >= lo.
func (r *Reader) Millis(name string, def, lo time.Duration) time.Duration {
	return r.duration(name, def, lo, time.Millisecond, "milliseconds")
}

// Seconds reads seconds (a number, fractions allowed) >= lo.
func (r *Reader) Seconds(name string, def, lo time.Duration) time.Duration {
	return r.duration(name, def, lo, time.Second, "seconds")
}

func (r *Reader) duration(name string, def, lo, unit time.Duration, what string) time.Duration {
	v := r.getenv(name)
	if v == "" {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	d := time.Duration(f * float64(unit))
	// f > 1e9 keeps the product inside a Duration.
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f > 1e9 || d < lo {
		r.Bad("%s=%q: want %s >= %g", name, v, what, float64(lo)/float64(unit))
		return def
	}
	return d
}

// Choice reads one of allowed; def when unset or bad.
func (r *Reader) Choice(name, def string, allowed ...string) string {
	v := r.getenv(name)
	if v == "" {
		return def
	}
	for _, a := range allowed {
		if v == a {
			return v
		}
	}
	r.Bad("%s=%q: want one of %s", name, v, strings.Join(allowed, ", "))
	return def
}
