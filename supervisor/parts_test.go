package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestResetArgv(t *testing.T) {
	for _, tc := range []struct {
		cmd   string
		chips []int
		want  []string
	}{
		{"tt-smi  -r {chips}", []int{2, 3}, []string{"tt-smi", "-r", "2,3"}},
		// An empty {chips} expands to nothing, not to an empty argument.
		{"/usr/local/bin/site-reset --chips={chips} {chips}", nil, []string{"/usr/local/bin/site-reset", "--chips="}},
	} {
		if got := resetArgv(tc.cmd, tc.chips); !slices.Equal(got, tc.want) {
			t.Errorf("resetArgv(%q, %v) = %q, want %q", tc.cmd, tc.chips, got, tc.want)
		}
	}
}

// Only the default reset command is skipped on a host without chips,
// however it is spaced.
func TestResetsWithoutChips(t *testing.T) {
	for cmd, want := range map[string]bool{
		DefaultResetCmd:                     false,
		"  tt-smi   -r {chips} ":            false,
		"tt-smi -r 0":                       true,
		"/usr/local/bin/test-reset {chips}": true,
	} {
		c := Config{ResetCmd: cmd}
		if got := c.resetsWithoutChips(); got != want {
			t.Errorf("resetsWithoutChips(%q) = %v, want %v", cmd, got, want)
		}
	}
}

func TestRestartPolicy(t *testing.T) {
	c := Defaults(8000)
	c.MaxRestarts, c.RestartWindow = 2, time.Minute
	p := newRestartPolicy(c)
	t0 := time.Unix(1000, 0)
	for i, tc := range []struct {
		at   time.Duration
		want bool
	}{
		{0, true}, {10 * time.Second, true}, {20 * time.Second, false}, // 2 in the window
		{61 * time.Second, true}, // the first fell out of the window
		{62 * time.Second, false},
	} {
		if got := p.allow(t0.Add(tc.at)); got != tc.want {
			t.Errorf("step %d at +%s: allow = %v, want %v", i, tc.at, got, tc.want)
		}
	}

	var delays []time.Duration
	for _, readyFor := range []time.Duration{0, 0, time.Minute, 0, 0, 0, 0, 0, 0, 0, 0, 0, 11 * time.Minute, 0} {
		delays = append(delays, p.backoff(readyFor))
	}
	ms := time.Millisecond
	want := []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 6400 * ms, 12800 * ms,
		25600 * ms, 30 * time.Second, 30 * time.Second, 30 * time.Second, 100 * ms, 200 * ms}
	if !slices.Equal(delays, want) {
		t.Errorf("backoff delays\n got %v\nwant %v", delays, want)
	}
}

// TestBackoffSchedules: the one backoff doubles from first; the reset
// pauses have no cap (ResetBackoff, then twice, then four times), the
// restarts stop at their cap, and restart begins again at first.
func TestBackoffSchedules(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name  string
		b     backoff
		steps string // n: next, r: restart
		want  []time.Duration
	}{
		{"reset pauses", backoff{first: 150 * ms}, "nnnn", []time.Duration{150 * ms, 300 * ms, 600 * ms, 1200 * ms}},
		{"capped", backoff{first: 100 * ms, cap: 250 * ms}, "nnnn", []time.Duration{100 * ms, 200 * ms, 250 * ms, 250 * ms}},
		{"restart", backoff{first: 100 * ms, cap: time.Second}, "nnrn", []time.Duration{100 * ms, 200 * ms, 100 * ms}},
	} {
		var got []time.Duration
		for _, step := range tc.steps {
			if step == 'r' {
				tc.b.restart()
				continue
			}
			got = append(got, tc.b.next())
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestChildEnvStripsSystemdVariables(t *testing.T) {
	got := childEnv([]string{"PATH=/bin", "NOTIFY_SOCKET=/run/x", "WATCHDOG_USEC=1", "WATCHDOG_PID=3",
		"LISTEN_FDS=1", "LISTEN_PID=3", "LISTEN_FDNAMES=a", "HF_MODEL=old", "NOTIFY_SOCKETS_ARE_FINE=1"},
		map[string]string{"HF_MODEL": "new", "A": "1"})
	want := []string{"PATH=/bin", "NOTIFY_SOCKETS_ARE_FINE=1", "A=1", "HF_MODEL=new"}
	if !slices.Equal(got, want) {
		t.Errorf("childEnv = %q, want %q", got, want)
	}
}

func TestChipCheck(t *testing.T) {
	for _, tc := range []struct {
		name    string
		setup   func(dev, sys string)
		tick    bool
		wantErr string
	}{
		{name: "alive", tick: true},
		{name: "heartbeat stuck", wantErr: "chip 0: tt_heartbeat stuck"},
		{name: "node missing", tick: true, setup: func(dev, _ string) { os.Remove(filepath.Join(dev, "1")) },
			wantErr: "chip 1: device node"},
		{name: "link down", setup: func(_, sys string) {
			os.WriteFile(filepath.Join(sys, "tenstorrent!0", "tt_heartbeat"), []byte("0xffffffff\n"), 0o644)
		}, wantErr: "chip 0: " + "%s" + " reads all ones"},
		{name: "no telemetry attribute", setup: func(_, sys string) {
			for _, id := range []string{"0", "1"} {
				os.Remove(filepath.Join(sys, "tenstorrent!"+id, "tt_heartbeat"))
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			dev, sys := filepath.Join(dir, "dev"), filepath.Join(dir, "sys")
			for _, id := range []string{"0", "1"} {
				mustWrite(t, filepath.Join(dev, id), "")
				mustWrite(t, filepath.Join(sys, "tenstorrent!"+id, "tt_heartbeat"), "7\n")
			}
			if tc.setup != nil {
				tc.setup(dev, sys)
			}
			var wg sync.WaitGroup
			ctx, cancel := context.WithCancel(context.Background())
			if tc.tick {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for n := 8; ctx.Err() == nil; n++ {
						for _, id := range []string{"0", "1"} {
							os.WriteFile(filepath.Join(sys, "tenstorrent!"+id, "tt_heartbeat"), []byte(fmt.Sprint(n)), 0o644)
						}
						time.Sleep(2 * time.Millisecond)
					}
				}()
			}
			err := chipHost{devDir: dev, sysfsDir: sys}.check(context.Background(), []int{0, 1}, 20*time.Millisecond, 200*time.Millisecond)
			cancel()
			wg.Wait()
			want := strings.Replace(tc.wantErr, "%s", filepath.Join(sys, "tenstorrent!0", "tt_heartbeat"), 1)
			if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
				t.Errorf("check: %v, want an error containing %q", err, want)
			}
		})
	}
}

func TestChipLocksAreExclusive(t *testing.T) {
	dir := t.TempDir()
	held, err := lockChips(dir, []int{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = lockChips(dir, []int{2, 1})
	var busy *ChipBusyError
	if !errors.As(err, &busy) || busy.Chip != 1 || busy.PID != fmt.Sprint(os.Getpid()) {
		t.Fatalf("second lock: %v, want chip 1 busy by PID %d", err, os.Getpid())
	}
	// The failed attempt released chip 2 again, and chip 0 stays held.
	if l, err := lockChips(dir, []int{2}); err != nil {
		t.Errorf("chip 2 still locked after a failed attempt: %v", err)
	} else {
		l.release()
	}
	held.release()
	if l, err := lockChips(dir, []int{0, 1}); err != nil {
		t.Errorf("relock after release: %v", err)
	} else {
		l.release()
	}
}
