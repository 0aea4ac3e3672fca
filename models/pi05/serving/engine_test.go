package serving

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ttmodel/tt-model/models/pi05"
)

// fakeDevice is a device whose cycle the test sets: a prefix takes prefix, a batched EXPERT of b
// requests takes expert(b). Its result's single action is the request's first noise value, so a
// test can tell answers apart.
type fakeDevice struct {
	prefix time.Duration
	expert func(b int) time.Duration
	slots  int

	mu      sync.Mutex
	batches []int // sizes of the EXPERT calls made
	adopted int
}

func newFake(prefix, expert time.Duration, slots int) *fakeDevice {
	return &fakeDevice{prefix: prefix, expert: func(int) time.Duration { return expert }, slots: slots}
}

func (f *fakeDevice) Slots() int { return f.slots }

func (f *fakeDevice) Prefix(slot int, in *pi05.Prepared) (pi05.Timing, bool, error) {
	time.Sleep(f.prefix)
	return pi05.Timing{Prefix: f.prefix}, false, nil
}

func (f *fakeDevice) Expert(slots []int, ins []*pi05.Prepared, pack bool) ([]*pi05.Result, error) {
	time.Sleep(f.expert(len(ins)))
	f.mu.Lock()
	f.batches = append(f.batches, len(ins))
	f.mu.Unlock()
	out := make([]*pi05.Result, len(ins))
	for i, in := range ins {
		out[i] = &pi05.Result{Actions: [][]float32{{in.Noise[0]}}, BatchedAs: len(ins)}
	}
	return out, nil
}

func (f *fakeDevice) Adopt(dst int, src Device, srcSlot int) error {
	f.mu.Lock()
	f.adopted++
	f.mu.Unlock()
	return nil
}

func (f *fakeDevice) calls() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int(nil), f.batches...)
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// baseConfig is dp over n devices without an SLO; tests adjust it.
func baseConfig(t *testing.T, n int) Config {
	return Config{Layout: DP, Devices: n, Threads: 1, PrefixDevices: n - 1, MaxBatch: 1, Routing: RouteLeast,
		RobotIdle: time.Minute, Join: JoinWork, Pack: true, HTTPThreads: 128,
		Hang: Hang{Action: HangDegrade, Drain: 200 * time.Millisecond, ExitCode: 75, Marker: filepath.Join(t.TempDir(), "hang_marker")}}
}

func fakes(n int, prefix, expert time.Duration, slots int) ([]Device, []*fakeDevice) {
	var devs []Device
	var fs []*fakeDevice
	for range n {
		f := newFake(prefix, expert, slots)
		devs, fs = append(devs, f), append(fs, f)
	}
	return devs, fs
}

func start(t *testing.T, cfg Config, devs []Device, fault Fault) *Engine {
	t.Helper()
	e, err := New(cfg, devs, fault, quiet())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	if err := e.Start(context.Background(), prepared(0), time.Millisecond, time.Second); err != nil {
		t.Fatal(err)
	}
	return e
}

func prepared(id float32) *pi05.Prepared { return &pi05.Prepared{Noise: []float32{id}, Steps: 1} }

// submit runs one request and returns which device answered and the action (the request's id).
func submit(t *testing.T, e *Engine, robot string, id float32) (int, float32, error) {
	t.Helper()
	a, err := e.Submit(context.Background(), robot, prepared(id))
	if err != nil {
		return -1, 0, err
	}
	return a.Device, a.Result.Actions[0][0], nil
}

// calibrated sets the devices' calibrated cycles (c(1), c(2), ...) and the host time as a
// calibration at start would, then recomputes the capacities: the arithmetic without the clock.
func calibrated(e *Engine, host time.Duration, cycles ...[]time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.host = host
	for i, c := range cycles {
		e.devs[i].cycle = c
	}
	e.recompute()
}

func msd(v ...int) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, x := range v {
		out[i] = time.Duration(x) * time.Millisecond
	}
	return out
}

func sloConfig(t *testing.T, n, maxBatch int, p50, p99 time.Duration) Config {
	cfg := baseConfig(t, n)
	cfg.MaxBatch, cfg.Routing = maxBatch, RouteRobot
	cfg.SLO = SLO{P50: p50, P99: p99, Margin: 5 * time.Millisecond, ClockGuard: 1, Guards: map[int]float64{}}
	return cfg
}

// The calibration arithmetic: p50(r) = host + c(r) + c(r-1)/2, p99(r) = host + c(r) + c(r-1); a
// device holds the largest r with p50 <= SLO and p99 + margin <= SLO_P99; guards multiply c.
func TestCapacityArithmetic(t *testing.T) {
	cfg := sloConfig(t, 3, 4, 100*time.Millisecond, 110*time.Millisecond)
	cfg.SLO.ClockGuard = 1.5
	cfg.SLO.Guards = map[int]float64{2: 2}
	devs, _ := fakes(3, 0, 0, 4)
	e := start(t, cfg, devs, Fault{DelayDevice: -1})
	// device 0: c = 20, 30, 40, 50 ms -> guarded 30, 45, 60, 75; host 10:
	//   r=1: p50 = 10+30 = 40, p99 = 40 (+5 <= 110) ok; r=2: p50 = 10+45+15 = 70, p99 = 85 ok;
	//   r=3: p50 = 10+60+22.5 = 92.5, p99 = 115 > 105: no. -> 2 robots.
	// device 1: c = 60 -> guarded 90: r=1: p50 = 100 ok, p99 = 100+5 <= 110 ok -> 1 robot (r=2: 90 > 4 entries? c(2) absent = c(1)).
	// device 2: c = 20 x guard 2 x 1.5 = 60: r=1: p50 = 70 ok; r=2: p50 = 10+60+30 = 100, p99 = 130 > 105 -> 1.
	calibrated(e, 10*time.Millisecond, msd(20, 30, 40, 50), msd(60), msd(20))
	info := e.Info()
	want := []int{2, 1, 1}
	for i, d := range info.Devices {
		if d.RobotsMax == nil || *d.RobotsMax != want[i] {
			t.Errorf("device %d holds %v robots, want %d", i, d.RobotsMax, want[i])
		}
	}
	if info.SLO.RMax != 4 {
		t.Errorf("R_max %d, want 4", info.SLO.RMax)
	}
	if p := info.SLO.Predicted[1]; p.Device != 0 || p.Robots != 2 || p.P50MS != 70 || p.P99MS != 85 {
		t.Errorf("prediction for device 0 with 2 robots: %+v, want p50 70 / p99 85", p)
	}
}

// Binding: robots are bound at their first request to the device with the most free slots; the
// robot beyond R_max gets a 503 naming the capacity with a Retry-After; a robot silent for
// PI05_ROBOT_IDLE_S frees its slot.
func TestBindingAdmissionAndIdleRelease(t *testing.T) {
	cfg := sloConfig(t, 2, 1, 100*time.Millisecond, 110*time.Millisecond)
	cfg.RobotIdle = 300 * time.Millisecond
	devs, _ := fakes(2, 0, time.Millisecond, 1)
	e := start(t, cfg, devs, Fault{DelayDevice: -1})
	calibrated(e, time.Millisecond, msd(10), msd(10))
	if err := e.Admits("z"); err != nil { // asking binds nothing: a and b still get the two slots
		t.Fatalf("robot z while slots are free: %v", err)
	}
	da, _, err := submit(t, e, "a", 1)
	if err != nil {
		t.Fatal(err)
	}
	db, _, err := submit(t, e, "b", 2)
	if err != nil {
		t.Fatal(err)
	}
	if da == db {
		t.Errorf("robots a and b both on device %d, want one each", da)
	}
	for range 3 { // a keeps its device
		if d, _, err := submit(t, e, "a", 1); err != nil || d != da {
			t.Fatalf("robot a: device %d, %v; want %d", d, err, da)
		}
	}
	_, _, err = submit(t, e, "c", 3)
	var ce *Error
	if !errors.As(err, &ce) || ce.Status != 503 || ce.Reason != "capacity" || !strings.Contains(ce.Msg, "2 of 2 robot slots") || ce.RetryAfterSeconds() < 1 {
		t.Fatalf("robot c beyond R_max: %v, want a 503 naming the capacity with a Retry-After", err)
	}
	if _, _, err := submit(t, e, "", 4); err == nil {
		t.Error("an anonymous request beyond R_max was admitted")
	}
	if err := e.Admits("c"); !errors.As(err, &ce) || ce.Reason != "capacity" {
		t.Errorf("Admits(c) beyond R_max: %v, want the capacity 503", err)
	}
	if err := e.Admits("a"); err != nil {
		t.Errorf("Admits(a), a bound robot: %v", err)
	}
	// keep b alive, let a go idle: c takes a's slot
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, _, err := submit(t, e, "b", 2); err != nil {
			t.Fatal(err)
		}
		d, _, err := submit(t, e, "c", 3)
		if err == nil {
			if d != da {
				t.Errorf("robot c got device %d, want a's freed device %d", d, da)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("robot a's slot was never released: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if info := e.Info(); info.SLO.Robots["a"].InFlight != 0 || len(info.SLO.Robots) != 2 {
		t.Errorf("robots after the release: %+v, want b and c", info.SLO.Robots)
	}
}

// Batching: with a batch window, requests that arrive together share one EXPERT call, up to
// PI05_MAX_BATCH, and each gets its own answer.
func TestBatchingUpToMaxBatch(t *testing.T) {
	cfg := baseConfig(t, 1)
	cfg.MaxBatch, cfg.BatchWindow = 4, 5*time.Second
	devs, fs := fakes(1, 0, time.Millisecond, 4)
	e := start(t, cfg, devs, Fault{DelayDevice: -1})
	var wg sync.WaitGroup
	got := make([]float32, 6)
	for i := range got[:4] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, got[i], _ = submit(t, e, "", float32(i+1))
		}()
	}
	wg.Wait()
	for i := range got[:4] {
		if got[i] != float32(i+1) {
			t.Errorf("request %d got the answer of %v", i+1, got[i])
		}
	}
	if c := fs[0].calls(); len(c) != 2 || c[1] != 4 { // the warm-up, then one batch of 4
		t.Errorf("EXPERT calls %v, want the warm-up and one batch of 4", c)
	}
}

// Least-loaded routing: concurrent requests spread over the devices.
func TestLeastLoadedRouting(t *testing.T) {
	cfg := baseConfig(t, 2)
	devs, _ := fakes(2, 0, 200*time.Millisecond, 1)
	e := start(t, cfg, devs, Fault{DelayDevice: -1})
	var wg sync.WaitGroup
	used := make([]int, 2)
	for i := range used {
		wg.Add(1)
		go func() {
			defer wg.Done()
			used[i], _, _ = submit(t, e, "", float32(i))
		}()
	}
	wg.Wait()
	if used[0] == used[1] {
		t.Errorf("two concurrent requests both went to device %d", used[0])
	}
	if peak := e.met.peak; peak != 2 {
		t.Errorf("busy peak %d, want both devices in a call at once", peak)
	}
}

// Steal: a request bound to a busy device that would miss its deadline is taken by the idle one.
func TestSteal(t *testing.T) {
	cfg := sloConfig(t, 2, 2, 400*time.Millisecond, 800*time.Millisecond)
	cfg.Steal = true
	devs, _ := fakes(2, 0, 300*time.Millisecond, 2)
	e := start(t, cfg, devs, Fault{DelayDevice: -1})
	// device 0 holds 2 robots, device 1 one: a and b both go to device 0
	calibrated(e, time.Millisecond, msd(100, 100), msd(300, 300))
	for _, id := range []string{"a", "b"} {
		if d, _, err := submit(t, e, id, 0); err != nil || d != 0 {
			t.Fatalf("robot %s: device %d, %v; want device 0", id, d, err)
		}
	}
	calibrated(e, time.Millisecond, msd(300, 300), msd(300, 300)) // device 0 turns out slow
	done := make(chan int)
	go func() {
		d, _, _ := submit(t, e, "a", 1)
		done <- d
	}()
	time.Sleep(50 * time.Millisecond) // a's call is running on device 0
	d, _, err := submit(t, e, "b", 2)
	if err != nil || d != 1 {
		t.Errorf("robot b behind a's call: device %d, %v; want device 1 (stolen)", d, err)
	}
	if d := <-done; d != 0 {
		t.Errorf("robot a: device %d, want 0", d)
	}
}

// A hang in dp: the stuck device is quarantined, its robot gets a 503 with a Retry-After, the
// hang marker is written, /health says degraded, capacity is recomputed, and the robot's next
// request is re-bound to the healthy device and answered.
func TestHangQuarantineRebind(t *testing.T) {
	cfg := sloConfig(t, 2, 1, 100*time.Millisecond, 110*time.Millisecond)
	cfg.Hang.After = 300 * time.Millisecond
	devs, _ := fakes(2, 0, time.Millisecond, 1)
	e := start(t, cfg, devs, Fault{HangDevice: 1, HangAfter: 2, DelayDevice: -1})
	calibrated(e, time.Millisecond, msd(10, 10), msd(10, 10))
	var bDev int
	for _, id := range []string{"a", "b"} {
		d, _, err := submit(t, e, id, 1)
		if err != nil {
			t.Fatal(err)
		}
		if id == "b" {
			bDev = d
		}
	}
	if bDev != 1 {
		t.Fatalf("robot b on device %d, want 1", bDev)
	}
	_, _, err := submit(t, e, "b", 2) // device 1's second serving call hangs
	var he *Error
	if !errors.As(err, &he) || he.Status != 503 || he.Reason != "hang" || he.RetryAfterSeconds() != 1 {
		t.Fatalf("robot b on the hung device: %v, want a 503 with Retry-After", err)
	}
	if h := e.Health(); h != "degraded" {
		t.Errorf("health %q, want degraded", h)
	}
	if b, err := os.ReadFile(cfg.Hang.Marker); err != nil || !strings.Contains(string(b), "device 1") {
		t.Errorf("hang marker: %q, %v", b, err)
	}
	if info := e.Info(); info.SLO.RMax != 1 || info.Devices[1].State != "quarantined" {
		t.Errorf("after the quarantine: R_max %d, device 1 %s; want 1 and quarantined", info.SLO.RMax, info.Devices[1].State)
	}
	// b's slot was freed with its device; a holds the only one left, so b waits for a to go idle.
	if _, _, err := submit(t, e, "b", 3); !errors.As(err, &he) || he.Reason != "capacity" {
		t.Errorf("robot b while a holds the last slot: %v, want a capacity 503", err)
	}
	e.mu.Lock()
	e.unbind(e.robots["a"])
	e.mu.Unlock()
	if d, v, err := submit(t, e, "b", 4); err != nil || d != 0 || v != 4 {
		t.Errorf("robot b re-bound: device %d, answer %v, %v; want device 0", d, v, err)
	}
	select {
	case code := <-e.Exit():
		t.Errorf("PI05_HANG_ACTION=degrade exited %d", code)
	default:
	}
	if !e.Quarantined() {
		t.Error("Quarantined() is false after a hang")
	}
}

// PI05_HANG_ACTION=exit: after the quarantine the engine drains, then delivers the exit code; new
// requests get a 503 meanwhile.
func TestHangExitAfterDrain(t *testing.T) {
	cfg := baseConfig(t, 2)
	cfg.Hang.After, cfg.Hang.Action = 300*time.Millisecond, HangExit
	devs, _ := fakes(2, 0, time.Millisecond, 1)
	e := start(t, cfg, devs, Fault{HangDevice: 0, HangAfter: 1, DelayDevice: -1})
	if _, _, err := submit(t, e, "", 1); err == nil {
		t.Fatal("the request on the hanging device was answered")
	}
	if h := e.Health(); h != "degraded" {
		t.Errorf("health %q, want degraded", h)
	}
	select {
	case code := <-e.Exit():
		if code != 75 {
			t.Errorf("exit code %d, want 75", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no exit after the drain")
	}
	var he *Error
	if _, _, err := submit(t, e, "", 2); !errors.As(err, &he) || he.Status != 503 {
		t.Errorf("a request while exiting: %v, want a 503", err)
	}
}

// sp and pd: a hang makes the engine hung and it exits, whatever PI05_HANG_ACTION says.
func TestHangHungLayouts(t *testing.T) {
	for _, tc := range []struct {
		layout  Layout
		devices int
		hang    int
	}{{SP, 1, 0}, {PD, 3, 1}, {PD, 3, 2}, {DP, 1, 0}} {
		t.Run(string(tc.layout)+"-device"+string(rune('0'+tc.hang)), func(t *testing.T) {
			cfg := baseConfig(t, tc.devices)
			cfg.Layout, cfg.Hang.After = tc.layout, 300*time.Millisecond
			devs, _ := fakes(tc.devices, time.Millisecond, time.Millisecond, 1)
			e := start(t, cfg, devs, Fault{HangDevice: tc.hang, HangAfter: 1, DelayDevice: -1})
			var wg sync.WaitGroup
			errs := make([]error, 2) // pd: one request per prefix device, so device 1 gets a call
			for i := range errs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, _, errs[i] = submit(t, e, "", float32(i))
				}()
			}
			wg.Wait()
			var he *Error
			if !errors.As(errors.Join(errs...), &he) || he.Status != 503 {
				t.Fatalf("requests: %v, want a 503 for the one on the hung device", errs)
			}
			if h := e.Health(); h != "hung" {
				t.Errorf("health %q, want hung", h)
			}
			select {
			case code := <-e.Exit():
				if code != 75 {
					t.Errorf("exit code %d, want 75", code)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no exit")
			}
		})
	}
}

// pd: prefix devices hand their requests to the expert device, which batches them.
func TestDisaggregated(t *testing.T) {
	cfg := baseConfig(t, 3)
	cfg.Layout, cfg.MaxBatch, cfg.BatchWindow = PD, 4, 5*time.Second
	devs, fs := fakes(3, 20*time.Millisecond, time.Millisecond, 4)
	e := start(t, cfg, devs, Fault{DelayDevice: -1})
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, v, err := submit(t, e, "", float32(i+10))
			if err != nil || d != 2 || v != float32(i+10) {
				t.Errorf("request %d: device %d, answer %v, %v; want the expert device 2", i, d, v, err)
			}
		}()
	}
	wg.Wait()
	if c := fs[2].calls(); c[len(c)-1] != 4 {
		t.Errorf("expert calls %v, want the last one a batch of 4", c)
	}
	if fs[2].adopted != 2+4 { // the warm-up of the two prefix devices, then four requests
		t.Errorf("%d prefixes adopted, want 6", fs[2].adopted)
	}
}

// A client that goes away is withdrawn from the queue and never answered.
func TestClientGoneWhileQueued(t *testing.T) {
	cfg := baseConfig(t, 1)
	devs, fs := fakes(1, 0, 300*time.Millisecond, 1)
	e := start(t, cfg, devs, Fault{DelayDevice: -1})
	go func() { _, _, _ = submit(t, e, "", 1) }()
	time.Sleep(50 * time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	if _, err := e.Submit(ctx, "", prepared(2)); !errors.Is(err, context.Canceled) {
		t.Errorf("a request whose client left: %v, want context.Canceled", err)
	}
	time.Sleep(400 * time.Millisecond)
	if c := fs[0].calls(); len(c) != 2 {
		t.Errorf("EXPERT calls %v: the abandoned request ran", c)
	}
}

// Calibration at start measures c(b) for every batch size on every device (the fake's cycle is a
// lower bound of what is measured) and refuses to start when no robot fits.
func TestCalibrationAtStart(t *testing.T) {
	cfg := sloConfig(t, 2, 2, 10*time.Second, 10*time.Second)
	devs, fs := fakes(2, 10*time.Millisecond, 20*time.Millisecond, 2)
	e := start(t, cfg, devs, Fault{DelayDevice: -1})
	info := e.Info()
	for _, d := range info.Devices {
		if d.CyclesMS["1"] < 30 || d.CyclesMS["2"] < 40 || *d.RobotsMax != 2 {
			t.Errorf("device %d: cycles %v, %d robots; want c(1) >= 30 ms, c(2) >= 40 ms, 2 robots", d.ID, d.CyclesMS, *d.RobotsMax)
		}
	}
	if c := fs[0].calls(); len(c) != 1+2*calibrationReps {
		t.Errorf("device 0 made %d EXPERT calls, want the warm-up and %d per batch size", len(c), calibrationReps)
	}
	tight := sloConfig(t, 1, 1, time.Millisecond, time.Millisecond)
	devs, _ = fakes(1, 10*time.Millisecond, 20*time.Millisecond, 1)
	e2, err := New(tight, devs, Fault{DelayDevice: -1}, quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	if err := e2.Start(context.Background(), prepared(0), time.Millisecond, 0); err == nil || !strings.Contains(err.Error(), "no robot fits") {
		t.Errorf("an SLO no robot can meet: %v, want 'no robot fits'", err)
	}
}

// PI05_JOIN=lateness: a free device with one request waits for a bound robot expected back (its
// last answer plus its usual think time) within the deadline, so their EXPERTs share one call.
func TestLatenessJoin(t *testing.T) {
	cfg := sloConfig(t, 1, 2, 800*time.Millisecond, 900*time.Millisecond)
	cfg.Join = JoinLateness
	devs, fs := fakes(1, 0, 10*time.Millisecond, 2)
	e := start(t, cfg, devs, Fault{DelayDevice: -1})
	calibrated(e, time.Millisecond, msd(10, 15))
	for i := range 3 { // b thinks 300 ms between its requests
		if _, _, err := submit(t, e, "b", float32(i)); err != nil {
			t.Fatal(err)
		}
		if i < 2 {
			time.Sleep(300 * time.Millisecond)
		}
	}
	done := make(chan error, 1)
	go func() {
		a, err := e.Submit(context.Background(), "a", prepared(9))
		if err == nil && a.Result.BatchedAs != 2 {
			err = errors.New("robot a's request ran alone")
		}
		done <- err
	}()
	time.Sleep(300 * time.Millisecond) // b comes back on time
	if _, _, err := submit(t, e, "b", 3); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("%v; EXPERT calls %v", err, fs[0].calls())
	}
}
