package journallog

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// envChild makes the test binary a child that logs one line per level
// through Handler on its real stderr, then exits.
const envChild = "TT_JOURNALLOG_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(envChild) == "1" {
		os.Exit(logEveryLevel())
	}
	os.Exit(m.Run())
}

func logEveryLevel() int {
	noTime := func(groups []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey && len(groups) == 0 {
			return slog.Attr{}
		}
		return a
	}
	h, err := Handler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: noTime})
	log := slog.New(h)
	if err != nil {
		log.Warn("log lines go without journal priorities", "err", err)
	}
	log.Debug("debug line")
	log.Info("info line", "detail", "two\nlines")
	log = log.With("unit", "x").WithGroup("g")
	log.Warn("warning line", "k", 1)
	log.Error("error line")
	log.Log(context.Background(), slog.LevelInfo+2, "between info and warning")
	return 0
}

// devIno is JOURNAL_STREAM's form of f: "device:inode".
func devIno(t *testing.T, f *os.File) string {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%d:%d", st.Dev, st.Ino)
}

// A child whose stderr is the stream JOURNAL_STREAM names prefixes every
// line with its level's priority; with the variable unset, naming another
// file (a child that inherited it but writes to a pipe), or malformed, the
// lines are slog's plain text format. Real processes, real fstat.
func TestPriorityPrefixOnlyOnTheJournalStream(t *testing.T) {
	other, err := os.Create(filepath.Join(t.TempDir(), "other"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for _, tc := range []struct {
		name   string
		stream func(stderr *os.File) string // JOURNAL_STREAM; "" unsets it
		golden string
	}{
		{"stderr is the stream", func(stderr *os.File) string { return devIno(t, stderr) }, "prefixed.txt"},
		{"no JOURNAL_STREAM", func(*os.File) string { return "" }, "plain.txt"},
		{"another stream", func(*os.File) string { return devIno(t, other) }, "plain.txt"},
		{"malformed", func(*os.File) string { return "journal" }, "malformed.txt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, kind := range []string{"file", "pipe"} {
				got := runChild(t, kind, tc.stream)
				want, err := os.ReadFile(filepath.Join("testdata", tc.golden))
				if err != nil {
					t.Fatal(err)
				}
				if got != string(want) {
					t.Errorf("stderr a %s: got\n%s\nwant (testdata/%s)\n%s", kind, got, tc.golden, want)
				}
			}
		})
	}
}

// runChild runs the logging child with its stderr on a file or a pipe and
// JOURNAL_STREAM from stream, and returns what it wrote there.
func runChild(t *testing.T, kind string, stream func(*os.File) string) string {
	t.Helper()
	var r, w *os.File
	var err error
	if kind == "pipe" {
		r, w, err = os.Pipe()
	} else {
		w, err = os.Create(filepath.Join(t.TempDir(), "stderr"))
	}
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	// The test's own JOURNAL_STREAM (when it runs under systemd) must not count.
	cmd.Env = append(os.Environ(), envChild+"=1", "JOURNAL_STREAM=")
	if s := stream(w); s != "" {
		cmd.Env = append(cmd.Env, "JOURNAL_STREAM="+s)
	}
	cmd.Stderr = w // an *os.File: the child's fd 2 is this very file or pipe
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	var out []byte
	if r != nil {
		out, err = io.ReadAll(r)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	if r == nil {
		if out, err = os.ReadFile(w.Name()); err != nil {
			t.Fatal(err)
		}
	}
	return string(out)
}
