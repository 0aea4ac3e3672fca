package supervisor

import (
	"fmt"
	"log/slog"
	"os"
	"syscall"
	"time"

	"github.com/ttmodel/tt-model/internal/procfs"
	"github.com/ttmodel/tt-model/internal/readiness"
)

// server is one running server process, leader of its own process group.
type server struct {
	*child
	started time.Time
	readyAt time.Time          // zero until ready
	lines   *readiness.Watcher // nil unless readiness is a log line
}

// spawn starts the server with a clean environment in its own process
// group. With --ready-line its output goes through pipes that are watched
// for the line; otherwise it writes straight to the supervisor's stdout and
// stderr.
func (s *Supervisor) spawn() (*server, error) {
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", os.DevNull, err)
	}
	defer devNull.Close()
	files := [3]*os.File{devNull, s.stdout, s.stderr}

	var lines *readiness.Watcher
	var readers, writers []*os.File
	if s.cfg.ReadyLine != "" {
		lines = readiness.NewWatcher(s.cfg.ReadyLine)
		for i := 1; i <= 2; i++ {
			r, w, err := os.Pipe()
			if err != nil {
				closeAll(readers, writers)
				return nil, fmt.Errorf("output pipe: %w", err)
			}
			readers, writers = append(readers, r), append(writers, w)
			files[i] = w
		}
	}

	env := childEnv(os.Environ(), s.cfg.Env)
	s.log.Info(LogStarting, "start", s.board.snapshot().Starts+1)
	c, err := s.reaper.start(s.cfg.Argv, env, files, s.locks.inherited()...)
	closeAll(nil, writers) // the server holds its own copies now
	if err != nil {
		closeAll(readers, nil)
		return nil, err
	}
	if lines != nil {
		go pump(lines.Stream(s.stdout), readers[0])
		go pump(lines.Stream(s.stderr), readers[1])
	}
	srv := &server{child: c, started: time.Now(), lines: lines}
	proc := procfs.Self(c.pid)
	s.board.update(func(st *Status) { st.Starts++; st.ServerPID, st.ServerStartTick = c.pid, proc.StartTick })
	s.log.Info(LogSpawned, "pid", c.pid, "argv", s.cfg.Argv)
	return srv, nil
}

// killStragglers SIGKILLs what is left of the server's process group after
// its leader ended: children it forked may still hold the chips.
func (srv *server) killStragglers(log *slog.Logger) {
	if err := syscall.Kill(-srv.pid, syscall.SIGKILL); err == nil {
		log.Warn("killed processes the server left behind in its process group", "pgid", srv.pid)
	}
}

func closeAll(a, b []*os.File) {
	for _, f := range append(a, b...) {
		f.Close()
	}
}
