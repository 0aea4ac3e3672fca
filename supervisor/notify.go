package supervisor

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

// notifier speaks the sd_notify protocol to $NOTIFY_SOCKET (a path or an
// @abstract name) through go-systemd; without the variable it does nothing.
// Each call is one datagram.
type notifier struct {
	log *slog.Logger
}

func (n notifier) send(lines ...string) {
	msg := strings.Join(lines, "\n")
	if _, err := daemon.SdNotify(false, msg); err != nil {
		n.log.Warn("sd_notify failed", "message", msg, "err", err)
	}
}

// watchdogInterval is WATCHDOG_USEC when it is meant for this process, else 0.
func watchdogInterval(log *slog.Logger) time.Duration {
	d, err := daemon.SdWatchdogEnabled(false)
	if err != nil {
		log.Warn("ignoring the systemd watchdog settings", "err", err)
		return 0
	}
	return d
}

// extendTimeout asks systemd for d more of the start timeout.
func extendTimeout(d time.Duration) string {
	return fmt.Sprintf("EXTEND_TIMEOUT_USEC=%d", d.Microseconds())
}

// statusLine is a one-line STATUS= value.
func statusLine(s string) string {
	return "STATUS=" + strings.ReplaceAll(s, "\n", " ")
}
