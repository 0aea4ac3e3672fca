package supervisor

import (
	"strconv"
	"strings"
)

// Messages of the supervisor's log that other tools read back: `tt-model
// serve` follows a starting server's output and tells a crash loop from a
// slow start by them. The log is slog's text format (msg=… detail=…).
const (
	// LogStarting is written just before each fork of the server, so every
	// line of the server's output comes after it (the two share the log).
	LogStarting = "starting the server"
	LogSpawned  = "server spawned"
	LogExited   = "server exited"
)

// LogState is the message the supervisor logs on entering state.
func LogState(s State) string { return "state " + s.String() }

// LogFields reads the msg and detail of one line of the supervisor's log;
// ok is false for a line without msg= (a server's own output, mostly).
func LogFields(line string) (msg, detail string, ok bool) {
	msg, ok = LogValue(line, "msg")
	if !ok {
		return "", "", false
	}
	detail, _ = LogValue(line, "detail")
	return msg, detail, true
}

// LogValue is the value of key= in a slog text line: a Go-quoted string,
// or the text up to the next blank.
func LogValue(line, key string) (string, bool) {
	i := strings.Index(line, " "+key+"=")
	if i < 0 {
		if !strings.HasPrefix(line, key+"=") {
			return "", false
		}
		i = -1
	}
	rest := line[i+len(key)+2:]
	if strings.HasPrefix(rest, `"`) {
		q, err := strconv.QuotedPrefix(rest)
		if err != nil {
			return "", false
		}
		v, err := strconv.Unquote(q)
		return v, err == nil
	}
	if j := strings.IndexByte(rest, ' '); j >= 0 {
		rest = rest[:j]
	}
	return rest, true
}
