package pi05

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// Request is one inference request after the HTTP layer decoded it.
type Request struct {
	Images       []RGB     // camera frames in slot order, 1..NumImages; missing cameras are padded
	Prompt       string    // the task; ignored when Tokens is set
	Tokens       []int     // pre-tokenized prompt ids (BOS included by the caller)
	State        []float32 // robot state; nil = zeros (lerobot pads the state to max_state_dim)
	Noise        []float32 // optional initial noise, NoiseRows x NoiseCols
	NoiseRows    int
	NoiseCols    int
	NumSteps     int     // 0 = PI05_NUM_STEPS
	Seed         *uint64 // noise seed when Noise is nil; nil = random (reported)
	PromptBucket int     // 0 = the smallest bucket that holds the tokens
	RTC          *RTC    // real-time chunking; nil = none
	PrefixCache  bool    // may use the policy's prefix cache (when the server has one)
}

// RequestError is a bad request; Field names the request key (canonical names: images, prompt,
// tokens, state, noise, num_steps, prompt_bucket) so each API can report it under its own name.
type RequestError struct {
	Field string
	Msg   string
}

func (e *RequestError) Error() string { return e.Field + ": " + e.Msg }

func badField(field, format string, args ...any) *RequestError {
	return &RequestError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Prepared is a validated, pre-processed request: exactly what the kernels take.
type Prepared struct {
	Images        []float32 // [cameras][3][S][S] in [-1, 1]; masked cameras are -1
	CameraMask    []bool
	Tokens        []int32 // [bucket], right-padded with 0
	TokenMask     []bool
	Bucket        int
	Noise         []float32 // [horizon][max_action_dim]
	Steps         int
	Seed          *uint64 // the noise seed when the server drew the noise
	Prompt        Prompt
	ImagesUsed    int
	ImagesPadded  int
	OriginalSizes [][2]int // [H, W] of each sent image
	StateBins     []int    // the discretized state in the prompt ("" when tokens were sent)
	Guide         *Guide   // real-time chunking in model space; nil = none
	PrefixCache   bool
}

// finite reports the first non-finite value's index, or -1.
func firstNonFinite(v []float32) int {
	for i, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return i
		}
	}
	return -1
}

// Prepare validates req and turns it into kernel inputs. A *RequestError names the bad field.
func (p *Policy) Prepare(req *Request) (*Prepared, error) {
	srv, d := p.Server, p.Dims
	out := &Prepared{}

	if n := len(req.Images); n < 1 || n > srv.NumImages {
		return nil, badField("images", "got %d images, this server takes 1 to %d (PI05_NUM_IMAGES)", n, srv.NumImages)
	}
	plane := 3 * d.Image * d.Image
	out.Images = make([]float32, srv.NumImages*plane)
	out.CameraMask = make([]bool, srv.NumImages)
	for i, img := range req.Images {
		if img.H <= 0 || img.W <= 0 || len(img.Pix) != img.H*img.W*3 {
			return nil, badField("images", "image %d is not an HxWx3 frame", i)
		}
		ResizeWithPad(out.Images[i*plane:(i+1)*plane], img, d.Image)
		out.CameraMask[i] = true
		out.OriginalSizes = append(out.OriginalSizes, [2]int{img.H, img.W})
	}
	for i := len(req.Images) * plane; i < len(out.Images); i++ {
		out.Images[i] = -1 // a missing camera: an image of -1 with mask false
	}
	out.ImagesUsed, out.ImagesPadded = len(req.Images), srv.NumImages-len(req.Images)

	steps := req.NumSteps
	if steps == 0 {
		steps = srv.NumSteps
	}
	if steps < 1 || steps > 10 {
		return nil, badField("num_steps", "%d is outside 1..10", steps)
	}
	out.Steps = steps

	if i := firstNonFinite(req.State); i >= 0 {
		return nil, badField("state", "state[%d] is %v, not a finite number", i, req.State[i])
	}
	var prompt Prompt
	var err error
	if req.Tokens != nil {
		prompt, err = TokensPrompt(req.Tokens, d.Vocab, srv.TokenLen)
		if err != nil {
			return nil, badField("tokens", "%v", err)
		}
	} else {
		if len(req.State) > p.Config.MaxStateDim {
			return nil, badField("state", "%d values, at most %d (max_state_dim)", len(req.State), p.Config.MaxStateDim)
		}
		state := req.State
		if state != nil {
			if state, err = p.Norm.NormalizeState(state); err != nil {
				return nil, badField("state", "%v", err)
			}
		}
		out.StateBins = DiscretizeState(state, p.Config.MaxStateDim)
		task := CutTask(req.Prompt, srv.TokenLen, p.Tokenizer.MaxPieceBytes())
		prompt, err = EncodePrompt(p.Tokenizer, PromptText(task, out.StateBins), srv.TokenLen)
		if err != nil {
			return nil, badField("prompt", "%v", err)
		}
	}
	out.Prompt = prompt
	out.Bucket, err = SelectPromptBucket(srv.NumImages, len(prompt.Tokens), req.PromptBucket)
	if err != nil {
		return nil, badField("prompt_bucket", "%v", err)
	}
	out.Tokens, out.TokenMask = prompt.Padded(out.Bucket)

	h, ad := srv.ActionHorizon, d.ActionDim
	if req.Noise != nil {
		if req.NoiseRows != h || req.NoiseCols != ad {
			return nil, badField("noise", "shape [%d, %d], want [%d, %d] (PI05_ACTION_HORIZON x max_action_dim)", req.NoiseRows, req.NoiseCols, h, ad)
		}
		if len(req.Noise) != h*ad {
			return nil, badField("noise", "%d values, want %d", len(req.Noise), h*ad)
		}
		if i := firstNonFinite(req.Noise); i >= 0 {
			return nil, badField("noise", "noise[%d][%d] is %v, not a finite number", i/ad, i%ad, req.Noise[i])
		}
		out.Noise = slices.Clone(req.Noise)
	} else {
		seed := rand.Uint64()
		if req.Seed != nil {
			seed = *req.Seed
		}
		out.Seed = &seed
		out.Noise = GaussianNoise(seed, h, ad)
	}
	if req.RTC != nil {
		if out.Guide, err = p.guide(req.RTC, h); err != nil {
			return nil, err
		}
	}
	out.PrefixCache = req.PrefixCache
	return out, nil
}
