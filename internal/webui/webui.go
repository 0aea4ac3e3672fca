// Package webui holds what tt-model's web pages share: the stylesheet and
// the small formatting helpers their templates use. The pages themselves
// live with what serves them (the server's console in server/console, the
// supervisor's status page in supervisor, the catalog site in builder); each
// is plain server-rendered HTML that works without JavaScript, and nothing
// on them is fetched from anywhere but their own server.
package webui

import (
	_ "embed" // the stylesheet
	"fmt"
	"html/template"
	"math"
	"net/http"
	"time"
)

// Style is the one stylesheet of every page.
//
//go:embed style.css
var Style string

// Funcs are the template functions every page may use.
func Funcs() template.FuncMap {
	return template.FuncMap{
		"duration": Duration,
		"clock":    func(t time.Time) string { return t.Local().Format("2006-01-02 15:04:05") },
		"iso":      func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
		"ms":       Millis,
	}
}

// Duration is d for people: "850 ms", "12.3 s", "4 min 05 s", "3 h 07 min",
// "2 d 04 h".
func Duration(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1f s", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%d min %02d s", int(d.Minutes()), int(d.Seconds())%60)
	case d < 24*time.Hour:
		return fmt.Sprintf("%d h %02d min", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%d d %02d h", int(d.Hours())/24, int(d.Hours())%24)
}

// Millis formats a number of milliseconds with 3 significant digits at
// least ("0.412", "41.2", "412").
func Millis(v float64) string {
	switch a := math.Abs(v); {
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.3f", v)
}

// WritePage answers with a rendered page: HTML, never cached, never
// sniffed as anything else, under the Content-Security-Policy csp that
// says what the page may load.
func WritePage(w http.ResponseWriter, csp string, page []byte) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	_, _ = w.Write(page)
}
