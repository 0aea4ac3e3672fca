package serving

import "time"

// Fault is the device part of the test-only fault switch (TT_MODEL_FAULT in tt-model-server):
// nothing hangs on a CPU by itself, so tests and demos make one happen. It acts on serving calls
// only (not on warm-up or calibration).
type Fault struct {
	// HangAfter > 0 makes the HangAfter-th serving call of device HangDevice block until the
	// engine stops: the watchdog sees a hang.
	HangDevice, HangAfter int
	// Delay > 0 adds that much to every serving call of DelayDevice (-1: every device), so that
	// tests can see calls overlap.
	DelayDevice int
	Delay       time.Duration
}

// apply runs before serving call number call of device; it reports whether the call was made to
// hang and the engine stopped meanwhile.
func (f Fault) apply(device, call int, stop <-chan struct{}) bool {
	if f.Delay > 0 && (f.DelayDevice < 0 || f.DelayDevice == device) {
		select {
		case <-time.After(f.Delay):
		case <-stop:
		}
	}
	if f.HangAfter > 0 && device == f.HangDevice && call == f.HangAfter {
		<-stop
		return true
	}
	return false
}
