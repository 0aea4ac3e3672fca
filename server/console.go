package server

import (
	"bytes"
	"net/http"
	"strings"
	"time"

	"github.com/ttmodel/tt-model/internal/webui"
	"github.com/ttmodel/tt-model/server/console"
)

// The web console (package console renders it): GET / is the page,
// /console/status its status section, /console/stats the JSON it is drawn
// from, /console/… the embedded stylesheet, scripts and sample picture.

// ConsoleModel is a model with a form on the console. Console is called for
// every page: its facts (weights pin, device) and, once loaded, its form.
type ConsoleModel interface {
	Console() console.Model
}

// consoleCSP lets a console page load and fetch from its own server only
// (and the blob: of the request body it offers for download): the browser
// itself refuses anything else.
const consoleCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; " +
	"connect-src 'self' blob:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

func (s *Server) consoleModel() console.Model {
	if c, ok := s.model.(ConsoleModel); ok {
		m := c.Console()
		if !s.ready.Load() {
			m.RFDETR, m.PI05 = nil, nil
		}
		m.Warning = s.testWeights()
		return m
	}
	return console.Model{}
}

func (s *Server) consolePage(w http.ResponseWriter, _ *http.Request, _ Recorder) {
	m := s.consoleModel()
	s.writePage(w, func(b *bytes.Buffer) error {
		return s.console.Page(b, console.Page{Status: s.statusSection(m), Model: m})
	})
}

func (s *Server) consoleStatus(w http.ResponseWriter, _ *http.Request, _ Recorder) {
	m := s.consoleModel()
	s.writePage(w, func(b *bytes.Buffer) error { return s.console.Status(b, s.statusSection(m)) })
}

func (s *Server) consoleStats(w http.ResponseWriter, _ *http.Request, _ Recorder) {
	w.Header().Set("Cache-Control", "no-store")
	WriteJSON(w, http.StatusOK, s.stats(time.Now()))
}

// consoleAsset serves /console/NAME; /console/ itself is the console.
func (s *Server) consoleAsset(w http.ResponseWriter, r *http.Request, _ Recorder) {
	name := strings.TrimPrefix(r.URL.Path, "/console/")
	if name == "" {
		http.Redirect(w, r, "/", http.StatusFound)
		return
	}
	body, ctype, ok := console.Asset(name)
	if !ok {
		WriteDetail(w, http.StatusNotFound, "Not Found")
		return
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(body)
}

// writePage renders into a buffer, so a failure is a clean 500.
func (s *Server) writePage(w http.ResponseWriter, render func(*bytes.Buffer) error) {
	var b bytes.Buffer
	if err := render(&b); err != nil {
		s.log.Error("console page", "err", err)
		WriteDetail(w, http.StatusInternalServerError, err.Error())
		return
	}
	webui.WritePage(w, consoleCSP, b.Bytes())
}

func (s *Server) statusSection(m console.Model) console.Status {
	return console.Status{Stats: s.stats(time.Now()), Facts: m.Facts}
}

// stats is the console's feed: /health's state, uptime, and the model
// requests of the last hour.
func (s *Server) stats(now time.Time) console.Stats {
	status, _, _ := s.state()
	st := console.Stats{Model: s.model.Name(), Status: status, Now: now, Started: s.started,
		UptimeS: now.Sub(s.started).Seconds()}
	if at := s.readySince.Load(); at != 0 {
		r := now.Sub(time.Unix(0, at)).Seconds()
		st.ReadyS = &r
	}
	st.Requests, st.Stages, st.Minutes = s.metrics.window.snapshot(now, s.started)
	return st
}

// timed records a model request's latency and status in the console's
// window.
func (s *Server) timed(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		h(sw, r)
		s.metrics.window.request(time.Now(), time.Since(start), sw.status)
	}
}
