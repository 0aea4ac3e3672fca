package pi05

import (
	"fmt"
	"strings"
	"testing"
)

// lerobot's LINEAR schedule (RTCProcessor.get_prefix_weights); the ramps are Debian's PyTorch
// torch.linspace(1, 0, n)[1:-1] in float32.
func TestRTCWeights(t *testing.T) {
	for _, tc := range []struct {
		d, h, total int
		want        string
	}{
		{5, 10, 12, "[1 1 1 1 1 0.8333333 0.6666666 0.5 0.33333334 0.16666667 0 0]"},
		{0, 3, 5, "[0.75 0.5 0.25 0 0]"},
		{4, 4, 6, "[1 1 1 1 0 0]"},
		{8, 4, 6, "[1 1 1 1 0 0]"},        // the delay is capped at the horizon
		{2, 10, 5, "[1 1 0.75 0.5 0.25]"}, // a horizon past the chunk compresses the ramp
		{10, 10, 5, "[1 1 1 1 1]"},
	} {
		if got := fmt.Sprint(RTCWeights(tc.d, tc.h, tc.total)); got != tc.want {
			t.Errorf("RTCWeights(%d, %d, %d) = %s, want %s", tc.d, tc.h, tc.total, got, tc.want)
		}
	}
}

func TestRTCGuide(t *testing.T) {
	p := loadTiny(t, 1, 8)
	p.Norm = &Normalizer{Action: &Quantiles{Q01: []float32{0, -2}, Q99: []float32{2, 2}}}
	g, err := p.guide(&RTC{Prev: []float32{1, 1, 2, -2, 0, 0}, PrevRows: 3, PrevCols: 2, InferenceDelay: 2, ExecutionHorizon: 4}, 8)
	if err != nil {
		t.Fatal(err)
	}
	ad := p.Dims.ActionDim
	// robot units back to model space: 2(x-q01)/(q99-q01) - 1
	if got := fmt.Sprint(g.Prev[:2], g.Prev[ad:ad+2], g.Prev[2*ad:2*ad+2], g.Prev[3*ad]); got != "[0 0.5] [1 -1] [-1 0] 0" {
		t.Errorf("normalized, zero-padded leftover: %s", got)
	}
	if got := fmt.Sprint(g.Weights[0], g.Weights[1], g.Weights[2], g.Weights[2*ad], g.Weights[3*ad], g.Weights[4*ad]); got != "1 1 0 0.6666666 0.33333334 0" {
		t.Errorf("weights (rows 0, 2, 3, 4; column 2 unsent): %s", got)
	}
	if g.MaxGuidance != DefaultMaxGuidance {
		t.Errorf("max guidance %v", g.MaxGuidance)
	}
	for _, tc := range []struct {
		rtc  RTC
		want string
	}{
		{RTC{Prev: make([]float32, 9*2), PrevRows: 9, PrevCols: 2, InferenceDelay: 1}, "rtc.prev_chunk_left_over: shape [9, 2]"},
		{RTC{Prev: make([]float32, 2), PrevRows: 1, PrevCols: 2, InferenceDelay: 9}, "rtc.inference_delay: 9 is outside 0..8"},
		{RTC{Prev: make([]float32, 2), PrevRows: 1, PrevCols: 2, ExecutionHorizon: -1}, "rtc.execution_horizon"},
		{RTC{Prev: make([]float32, 2), PrevRows: 1, PrevCols: 2, MaxGuidance: -1}, "rtc.max_guidance_weight"},
		{RTC{Prev: make([]float32, 2), PrevRows: 1, PrevCols: 2, MaxGuidance: 1001}, "rtc.max_guidance_weight: 1001 is outside (0, 1000]"},
		{RTC{Prev: []float32{20000, 0}, PrevRows: 1, PrevCols: 2}, "rtc.prev_chunk_left_over: [0][0] is 20000, 19999 in the model's normalized action space, outside -10000..10000"},
		{RTC{Prev: []float32{0, 3e38}, PrevRows: 1, PrevCols: 2}, "rtc.prev_chunk_left_over: [0][1] is 3e+38"},
	} {
		if _, err := p.guide(&tc.rtc, 8); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.rtc, err, tc.want)
		}
	}
}
