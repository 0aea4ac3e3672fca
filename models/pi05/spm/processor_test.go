package spm

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

type golden struct {
	Text string `json:"text"`
	IDs  []int  `json:"ids"`
}

func readGoldens(t *testing.T, path string) []golden {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []golden
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var g golden
		if err := json.Unmarshal(sc.Bytes(), &g); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, g)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// The goldens are python3-sentencepiece's ids for models trained by spm_train (testdata/gen_goldens.py).
func TestEncodeMatchesSentencePiece(t *testing.T) {
	for _, name := range []string{"bpe_bytefallback", "bpe_tiny", "bpe_gemma_like", "bpe_nfkc", "unigram_nfkc", "unigram_bytefallback"} {
		t.Run(name, func(t *testing.T) {
			p, err := Load(filepath.Join("testdata", name+".model"))
			if err != nil {
				t.Fatal(err)
			}
			goldens := readGoldens(t, filepath.Join("testdata", "golden_"+name+".jsonl"))
			if len(goldens) < 300 {
				t.Fatalf("only %d goldens", len(goldens))
			}
			bad := 0
			for _, g := range goldens {
				got := p.Encode(g.Text)
				if !slices.Equal(got, g.IDs) {
					bad++
					if bad <= 5 {
						t.Errorf("Encode(%q) = %v, want %v", g.Text, got, g.IDs)
					}
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d strings differ", bad, len(goldens))
			}
		})
	}
}

func TestSpecialIDs(t *testing.T) {
	tests := []struct {
		model              string
		pad, eos, bos, unk int
		size               int
	}{
		{"bpe_bytefallback", 0, 1, 2, 3, 700},
		{"bpe_nfkc", -1, 2, 1, 0, 500},
	}
	for _, tc := range tests {
		p, err := Load(filepath.Join("testdata", tc.model+".model"))
		if err != nil {
			t.Fatal(err)
		}
		if p.Pad() != tc.pad || p.EOS() != tc.eos || p.BOS() != tc.bos || p.Unk() != tc.unk || p.Size() != tc.size {
			t.Errorf("%s: pad %d eos %d bos %d unk %d size %d, want %d %d %d %d %d", tc.model,
				p.Pad(), p.EOS(), p.BOS(), p.Unk(), p.Size(), tc.pad, tc.eos, tc.bos, tc.unk, tc.size)
		}
	}
}

func TestBadModels(t *testing.T) {
	good, err := os.ReadFile(filepath.Join("testdata", "bpe_bytefallback.model"))
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string][]byte{
		"empty":     {},
		"truncated": good[:len(good)/2],
		"garbage":   []byte("this is not a protobuf \xff\xff\xff"),
	}
	for name, data := range tests {
		if _, err := New(data); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
	if _, err := Load(filepath.Join("testdata", "missing.model")); err == nil {
		t.Error("Load of a missing file succeeded")
	}
}

// Any input, including invalid UTF-8, encodes without panicking to ids inside the vocabulary.
func FuzzEncode(f *testing.F) {
	var procs []*Processor
	for _, name := range []string{"bpe_gemma_like", "bpe_nfkc", "unigram_nfkc", "unigram_bytefallback"} {
		p, err := Load(filepath.Join("testdata", name+".model"))
		if err != nil {
			f.Fatal(err)
		}
		procs = append(procs, p)
	}
	for _, s := range []string{"", " ", "Task: pick, State: 1 2;\nAction: ", "\xff\xfe", "東京 🤖", "<start_of_turn>\u2581\u2581"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, p := range procs {
			for _, id := range p.Encode(s) {
				if id < 0 || id >= p.Size() {
					t.Fatalf("Encode(%q) gave id %d outside [0, %d)", s, id, p.Size())
				}
			}
		}
	})
}
