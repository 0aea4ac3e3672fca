package pi05

import (
	"errors"
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func grayFrame(h, w int, v uint8) RGB {
	pix := make([]uint8, h*w*3)
	for i := range pix {
		pix[i] = v
	}
	return RGB{H: h, W: w, Pix: pix}
}

func TestPrepareRejectsBadRequests(t *testing.T) {
	p := loadTiny(t, 2, 50)
	img := grayFrame(30, 40, 100)
	seed := uint64(1)
	tests := []struct {
		name  string
		req   Request
		field string
		msg   string
	}{
		{"no image", Request{Prompt: "x"}, "images", "got 0 images"},
		{"too many images", Request{Images: []RGB{img, img, img}}, "images", "1 to 2"},
		{"NaN state", Request{Images: []RGB{img}, State: []float32{0, float32(math.NaN())}}, "state", "state[1] is NaN"},
		{"Inf state", Request{Images: []RGB{img}, State: []float32{float32(math.Inf(-1))}}, "state", "state[0] is -Inf"},
		{"long state", Request{Images: []RGB{img}, State: make([]float32, 33)}, "state", "33 values"},
		{"noise shape", Request{Images: []RGB{img}, Noise: make([]float32, 10*32), NoiseRows: 10, NoiseCols: 32}, "noise", "shape [10, 32], want [50, 32]"},
		{"noise NaN", Request{Images: []RGB{img}, Noise: append(make([]float32, 50*32-1), float32(math.NaN())), NoiseRows: 50, NoiseCols: 32}, "noise", "noise[49][31] is NaN"},
		{"token id", Request{Images: []RGB{img}, Tokens: []int{2, 600}}, "tokens", "outside the vocabulary"},
		{"empty tokens", Request{Images: []RGB{img}, Tokens: []int{}}, "tokens", "empty"},
		{"steps", Request{Images: []RGB{img}, NumSteps: 11, Seed: &seed}, "num_steps", "outside 1..10"},
		{"bucket", Request{Images: []RGB{img}, PromptBucket: 100}, "prompt_bucket", "not one of [32 64 128 160 224]"},
		{"bucket too small", Request{Images: []RGB{img}, Prompt: strings.Repeat("pick up the cup ", 10), PromptBucket: 32}, "prompt_bucket", "cannot hold"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.Prepare(&tc.req)
			var re *RequestError
			if !errors.As(err, &re) || re.Field != tc.field || !strings.Contains(re.Msg, tc.msg) {
				t.Errorf("err = %v, want field %s with %q", err, tc.field, tc.msg)
			}
		})
	}
}

func TestPrepareBuildsKernelInputs(t *testing.T) {
	p := loadTiny(t, 2, 50)
	seed := uint64(7)
	in, err := p.Prepare(&Request{Images: []RGB{grayFrame(56, 56, 255)}, Prompt: "  pick_up\nthe cup ", State: []float32{-1, 0.5}, Seed: &seed})
	if err != nil {
		t.Fatal(err)
	}
	if want := "Task: pick up the cup, State: 0 192" + strings.Repeat(" 128", 30) + ";\nAction: "; in.Prompt.Text != want {
		t.Errorf("prompt %q, want %q", in.Prompt.Text, want)
	}
	if in.Prompt.Tokens[0] != int32(p.Tokenizer.BOS()) || in.Prompt.Truncated {
		t.Errorf("tokens %v truncated %v", in.Prompt.Tokens, in.Prompt.Truncated)
	}
	n := len(in.Prompt.Tokens)
	if in.Bucket != must(SelectPromptBucket(2, n, 0)) || len(in.Tokens) != in.Bucket || !in.TokenMask[n-1] || in.TokenMask[n] {
		t.Errorf("bucket %d for %d tokens, mask %v", in.Bucket, n, in.TokenMask)
	}
	plane := 3 * 56 * 56
	if !in.CameraMask[0] || in.CameraMask[1] || in.ImagesUsed != 1 || in.ImagesPadded != 1 {
		t.Errorf("camera mask %v used %d padded %d", in.CameraMask, in.ImagesUsed, in.ImagesPadded)
	}
	if in.Images[0] != 1 || in.Images[plane] != -1 || in.Images[2*plane-1] != -1 {
		t.Errorf("white frame -> %v, missing camera -> %v", in.Images[0], in.Images[plane])
	}
	if !slices.Equal(in.Noise, GaussianNoise(7, 50, 32)) || in.Steps != 10 {
		t.Error("seeded noise or default steps wrong")
	}
}

func TestPromptTruncation(t *testing.T) {
	p := loadTiny(t, 1, 10)
	p.Server.TokenLen = 40
	in, err := p.Prepare(&Request{Images: []RGB{grayFrame(8, 8, 3)}, Prompt: strings.Repeat("stack the cubes ", 20)})
	if err != nil {
		t.Fatal(err)
	}
	if !in.Prompt.Truncated || len(in.Prompt.Tokens) != 40 || in.Prompt.Original <= 40 || in.Bucket != 64 {
		t.Errorf("truncated %v, %d tokens of %d, bucket %d", in.Prompt.Truncated, len(in.Prompt.Tokens), in.Prompt.Original, in.Bucket)
	}
}

// A long task is cut before it is tokenized: a 4 MB one costs what a short one does (the whole of it
// once took 0.4 s of CPU per MB and hundreds of MB of merge state), and its tokens are those of the
// whole task, tokenized and then truncated.
func TestLongPromptCutBeforeTokenizing(t *testing.T) {
	p := loadTiny(t, 1, 10)
	img := []RGB{grayFrame(8, 8, 3)}
	long := strings.Repeat("stack the red cubes, then wipe_the table\n ", 100000) // 4.3 MB
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	in, err := p.Prepare(&Request{Images: img, Prompt: long})
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 4<<20 {
		t.Errorf("preparing a 4.3 MB prompt allocated %d MB", grew>>20)
	}
	if !in.Prompt.Truncated || len(in.Prompt.Tokens) != p.Server.TokenLen {
		t.Errorf("truncated %v, %d tokens; want the %d of the token buffer", in.Prompt.Truncated, len(in.Prompt.Tokens), p.Server.TokenLen)
	}
	// The whole of a shorter long task (still far past the cut), tokenized, then truncated.
	mid := long[:200000]
	whole, err := EncodePrompt(p.Tokenizer, PromptText(mid, in.StateBins), p.Server.TokenLen)
	if err != nil {
		t.Fatal(err)
	}
	cut, err := p.Prepare(&Request{Images: img, Prompt: "  \n" + mid})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cut.Prompt.Tokens, whole.Tokens) || !slices.Equal(in.Prompt.Tokens, whole.Tokens) {
		t.Errorf("tokens of the cut task %v, of the whole %v", cut.Prompt.Tokens, whole.Tokens)
	}
	if len(cut.Prompt.Text) >= len(mid) {
		t.Errorf("the prompt text is %d bytes: the task was not cut", len(cut.Prompt.Text))
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
