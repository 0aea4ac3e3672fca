package rfdetr

import (
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ttmodel/tt-model/models/safetensors"
)

// writeEntries writes a checkpoint of zeros with the given names and shapes.
func writeEntries(t *testing.T, entries []safetensors.Entry) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), WeightsFile)
	if err := safetensors.WriteFile(path, entries, nil); err != nil {
		t.Fatal(err)
	}
	return path
}

// zeroEntries lists every needed tensor under scheme as BF16 zeros.
func zeroEntries(scheme string) []safetensors.Entry {
	var out []safetensors.Entry
	for _, s := range Specs() {
		parts := SourceNames(scheme, s.Name)
		for _, name := range parts {
			shape := append([]int{s.Shape[0] / len(parts)}, s.Shape[1:]...)
			n := numElements(shape)
			out = append(out, safetensors.Entry{Name: name, DType: safetensors.BF16, Shape: shape,
				Data: func() []float32 { return make([]float32, n) }})
		}
	}
	return out
}

func TestRandomCheckpointsLoadUnderBothSchemes(t *testing.T) {
	for _, rc := range []RandomCheckpoint{
		{Seed: 1, DType: safetensors.F32, Scheme: SchemeRFDETR},
		{Seed: 1, DType: safetensors.BF16, Scheme: SchemeTransformers},
	} {
		t.Run(rc.Scheme, func(t *testing.T) {
			dir := t.TempDir()
			if err := rc.Write(dir); err != nil {
				t.Fatal(err)
			}
			w, err := OpenWeights(filepath.Join(dir, WeightsFile))
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			if w.Scheme() != rc.Scheme {
				t.Errorf("detected scheme %s, want %s", w.Scheme(), rc.Scheme)
			}
			if !w.Random() {
				t.Error("a RandomCheckpoint does not say it is random")
			}
			for _, s := range w.Specs() {
				got, shape, err := w.Tensor(s.Name)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(shape, s.Shape) || len(got) != numElements(s.Shape) {
					t.Fatalf("%s: shape %v with %d values, want %v", s.Name, shape, len(got), s.Shape)
				}
				// The canonical values survive the scheme's renaming and the q/k/v
				// concatenation, up to the file's dtype rounding.
				want := rc.values(s)
				for i := range got {
					r := want[i]
					if rc.DType == safetensors.BF16 {
						r = bf16Round(r)
					}
					if got[i] != r {
						t.Fatalf("%s[%d] = %v, want %v", s.Name, i, got[i], r)
					}
				}
			}
			cfg, err := LoadConfig(filepath.Join(dir, ConfigFile))
			if err != nil || cfg.ID2Label[17] != "cat" {
				t.Errorf("config: %+v, %v", cfg.ID2Label[17], err)
			}
		})
	}
}

func bf16Round(f float32) float32 {
	return math.Float32frombits(uint32(safetensors.Float32ToBF16(f)) << 16)
}

func TestCheckpointProblemsAreAllReported(t *testing.T) {
	cases := []struct {
		name    string
		scheme  string
		mutate  func(map[string]*safetensors.Entry)
		missing []string
		want    []string
	}{
		{
			name:   "rfdetr names",
			scheme: SchemeRFDETR,
			mutate: func(m map[string]*safetensors.Entry) {
				m["class_embed.weight"].Shape = []int{80, 256}
				m["refpoint_embed.weight"].Shape = []int{299, 4}
			},
			missing: []string{"transformer.decoder.layers.1.linear2.bias", "backbone.0.encoder.encoder.encoder.layer.3.mlp.fc1.weight"},
			want: []string{
				"4 tensor problem(s)",
				"class_embed.weight: shape [80 256], want [91 256]",
				"refpoint_embed.weight: shape [299 4], want [>=300 4]",
				"transformer.decoder.layers.1.linear2.bias: missing, want shape [256]",
				"backbone.0.encoder.encoder.encoder.layer.3.mlp.fc1.weight: missing, want shape [1536 384]",
			},
		},
		{
			name:   "transformers names",
			scheme: SchemeTransformers,
			mutate: func(m map[string]*safetensors.Entry) {
				m["model.decoder.layers.2.self_attn.v_proj.weight"].Shape = []int{256, 128}
			},
			missing: []string{"model.decoder.layers.0.self_attn.k_proj.bias"},
			want: []string{
				"(transformers names): 2 tensor problem(s)",
				"model.decoder.layers.2.self_attn.v_proj.weight (canonical transformer.decoder.layers.2.self_attn.in_proj_weight): shape [256 128], want [256 256]",
				"model.decoder.layers.0.self_attn.k_proj.bias (canonical transformer.decoder.layers.0.self_attn.in_proj_bias): missing, want shape [256]",
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			entries := zeroEntries(c.scheme)
			byName := map[string]*safetensors.Entry{}
			for i := range entries {
				byName[entries[i].Name] = &entries[i]
			}
			c.mutate(byName)
			for _, e := range byName {
				n := numElements(e.Shape)
				e.Data = func() []float32 { return make([]float32, n) }
			}
			entries = slices.DeleteFunc(entries, func(e safetensors.Entry) bool { return slices.Contains(c.missing, e.Name) })
			_, err := OpenWeights(writeEntries(t, entries))
			if err == nil {
				t.Fatal("broken checkpoint accepted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestOnlyGeneratedCheckpointsAreRandom(t *testing.T) {
	w, err := OpenWeights(writeEntries(t, zeroEntries(SchemeRFDETR)))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if w.Random() {
		t.Error("a checkpoint without the generator stamp reads as random")
	}
}

func TestCheckpointWithoutRFDETRTensors(t *testing.T) {
	path := writeEntries(t, []safetensors.Entry{{Name: "lm_head.weight", DType: safetensors.F32, Shape: []int{2}, Data: func() []float32 { return []float32{1, 2} }}})
	_, err := OpenWeights(path)
	if err == nil || !strings.Contains(err.Error(), "no RF-DETR tensors found") || !strings.Contains(err.Error(), "lm_head.weight") {
		t.Errorf("error = %v", err)
	}
	if _, err := OpenWeights(filepath.Join(t.TempDir(), "absent.safetensors")); err == nil || !strings.Contains(err.Error(), "absent.safetensors") {
		t.Errorf("missing file error = %v", err)
	}
}
