package pi05

// lerobot's RTCConfig defaults (policies/rtc/configuration_rtc.py).
const (
	DefaultExecutionHorizon = 10
	DefaultMaxGuidance      = 10
)

// The bounds of a guide. The first denoising step scales the leftover's distance from the noise by
// up to the max guidance weight (later steps' weights stay near the step count: no growth), so with
// both bounded the loop's values stay about 1e7 times the model's action range, far from float32's
// overflow in the network's norms; beyond them a finite request could come back NaN.
const (
	MaxGuidanceLimit = 1000 // 100 times lerobot's default
	MaxLeftover      = 1e4  // |value| in the model's (normalized) action space
)

// RTC is real-time chunking for one request: lerobot's guided inpainting of the previous chunk.
// While the robot executes the previous chunk, the next one is computed; the first InferenceDelay
// actions of the new chunk will be executed before it arrives, so the denoising loop pulls them
// toward the previous chunk's leftover, with a weight that falls linearly to 0 at ExecutionHorizon
// (pi05.h, pi05_guide, has the per-step formula).
type RTC struct {
	// Prev is the previous chunk's unexecuted actions, [PrevRows][PrevCols] row-major, in the space
	// the server returns actions in (un-normalized when the checkpoint has action statistics).
	Prev               []float32
	PrevRows, PrevCols int
	InferenceDelay     int     // d >= 0
	ExecutionHorizon   int     // H >= 1; 0 = DefaultExecutionHorizon (capped at the chunk)
	MaxGuidance        float32 // > 0; 0 = DefaultMaxGuidance
}

// Guide is real-time chunking as the EXPERT loop takes it (pi05.h, pi05_guide): Prev and Weights are
// [horizon][ActionDim] in model space; a weight of 0 leaves that value unguided.
type Guide struct {
	Prev, Weights []float32
	MaxGuidance   float32
}

// RTCWeights is lerobot's LINEAR prefix schedule over total rows: 1 for the first min(delay,
// horizon) rows, then linspace(1, 0) strictly between 1 and 0 up to row horizon, then 0.
func RTCWeights(delay, horizon, total int) []float32 {
	w := make([]float32, total)
	start := min(delay, horizon)
	for r := 0; r < min(start, total); r++ {
		w[r] = 1
	}
	end := min(horizon, total)
	if n := end - start; n > 0 {
		ramp := linspace10(n + 2)
		copy(w[start:end], ramp[1:n+1])
	}
	return w
}

// linspace10 is torch.linspace(1, 0, steps) in float32, value for value: the first half steps from
// 1, the second half back from 0. (The conversions keep each product rounded: no fused multiply-add.)
func linspace10(steps int) []float32 {
	out := make([]float32, steps)
	step := float32(-1) / float32(steps-1)
	for i := range out {
		if i < steps/2 {
			out[i] = 1 + float32(step*float32(i))
		} else {
			out[i] = 0 - float32(step*float32(steps-1-i))
		}
	}
	return out
}

// guide turns the request's RTC into the kernels' guide: the leftover normalized back to model
// space and zero-padded to [horizon][ActionDim], the schedule on the columns the client sent (the
// padding columns it did not send are left unguided). A *RequestError names the bad field.
func (p *Policy) guide(r *RTC, horizon int) (*Guide, error) {
	ad := p.Dims.ActionDim
	if r.PrevRows < 1 || r.PrevRows > horizon || r.PrevCols < 1 || r.PrevCols > ad || len(r.Prev) != r.PrevRows*r.PrevCols {
		return nil, badField("rtc.prev_chunk_left_over", "shape [%d, %d] with %d values, want 1..%d rows (the chunk) of 1..%d columns",
			r.PrevRows, r.PrevCols, len(r.Prev), horizon, ad)
	}
	if i := firstNonFinite(r.Prev); i >= 0 {
		return nil, badField("rtc.prev_chunk_left_over", "[%d][%d] is %v, not a finite number", i/r.PrevCols, i%r.PrevCols, r.Prev[i])
	}
	if r.InferenceDelay < 0 || r.InferenceDelay > horizon {
		return nil, badField("rtc.inference_delay", "%d is outside 0..%d (the chunk)", r.InferenceDelay, horizon)
	}
	exec := r.ExecutionHorizon
	if exec == 0 {
		exec = min(DefaultExecutionHorizon, horizon)
	}
	if exec < 1 || exec > horizon {
		return nil, badField("rtc.execution_horizon", "%d is outside 1..%d (the chunk)", exec, horizon)
	}
	maxG := r.MaxGuidance
	if maxG == 0 {
		maxG = DefaultMaxGuidance
	}
	if !(maxG > 0 && maxG <= MaxGuidanceLimit) {
		return nil, badField("rtc.max_guidance_weight", "%v is outside (0, %d]", maxG, MaxGuidanceLimit)
	}
	rows := make([][]float32, r.PrevRows)
	for i := range rows {
		rows[i] = append([]float32(nil), r.Prev[i*r.PrevCols:(i+1)*r.PrevCols]...)
	}
	p.Norm.NormalizeActions(rows)
	for i, row := range rows {
		for c, v := range row {
			if !(v >= -MaxLeftover && v <= MaxLeftover) {
				sent := r.Prev[i*r.PrevCols+c]
				if sent == v {
					return nil, badField("rtc.prev_chunk_left_over", "[%d][%d] is %v, outside %v..%v", i, c, sent, -MaxLeftover, MaxLeftover)
				}
				return nil, badField("rtc.prev_chunk_left_over", "[%d][%d] is %v, %v in the model's normalized action space, outside %v..%v",
					i, c, sent, v, -MaxLeftover, MaxLeftover)
			}
		}
	}
	g := &Guide{Prev: make([]float32, horizon*ad), Weights: make([]float32, horizon*ad), MaxGuidance: maxG}
	for i, row := range rows {
		copy(g.Prev[i*ad:], row)
	}
	for i, w := range RTCWeights(r.InferenceDelay, exec, horizon) {
		for c := 0; c < r.PrevCols; c++ {
			g.Weights[i*ad+c] = w
		}
	}
	return g, nil
}
