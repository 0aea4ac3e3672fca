package pi05

import (
	"context"
	"math"
	"testing"

	"github.com/ttmodel/tt-model/native"
)

// sameBits reports the first value where two action chunks differ in any bit, or "".
func sameBits(t *testing.T, a, b [][]float32) {
	t.Helper()
	for r := range a {
		for c := range a[r] {
			if math.Float32bits(a[r][c]) != math.Float32bits(b[r][c]) {
				t.Fatalf("action [%d][%d]: %v vs %v, want bit-identical", r, c, a[r][c], b[r][c])
			}
		}
	}
}

func tinyRequest(salt uint8, prompt string) *Request {
	pix := make([]uint8, 30*40*3)
	for i := range pix {
		pix[i] = uint8(i*7) + salt
	}
	seed := uint64(5)
	return &Request{Images: []RGB{{H: 30, W: 40, Pix: pix}}, Prompt: prompt, State: []float32{0.2, -0.4}, Seed: &seed, PrefixCache: true}
}

func run(t *testing.T, p *Policy, req *Request) *Result {
	t.Helper()
	in, err := p.Prepare(req)
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Run(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// A prefix-cache hit gives the miss's actions bit for bit, on the reference and the bf16 paths; a
// different frame, prompt or state is a miss; a request may opt out.
func TestPrefixCacheHitEqualsMiss(t *testing.T) {
	for _, prec := range []native.Pi05Precision{native.Pi05Ref, native.Pi05BF16} {
		t.Run(prec.String(), func(t *testing.T) {
			p := loadTiny(t, 2, 10, prec)
			p.Cache = NewPrefixCache(64 << 20)
			miss := run(t, p, tinyRequest(0, "pick"))
			hit := run(t, p, tinyRequest(0, "pick"))
			if miss.PrefixCacheHit || !hit.PrefixCacheHit {
				t.Fatalf("first request hit=%v, second hit=%v", miss.PrefixCacheHit, hit.PrefixCacheHit)
			}
			sameBits(t, miss.Actions, hit.Actions)
			if hit.Timing.Vision != 0 {
				t.Errorf("a hit ran VISION for %v", hit.Timing.Vision)
			}
			for _, req := range []*Request{tinyRequest(1, "pick"), tinyRequest(0, "place")} {
				if run(t, p, req).PrefixCacheHit {
					t.Error("a different frame or prompt hit the cache")
				}
			}
			off := tinyRequest(0, "pick")
			off.PrefixCache = false
			if run(t, p, off).PrefixCacheHit {
				t.Error("a request that opted out hit the cache")
			}
			s := p.Cache.Stats()
			if s.Hits != 1 || s.Misses != 3 || s.Entries != 3 || s.Bytes <= 0 {
				t.Errorf("stats %+v, want 1 hit, 3 misses, 3 entries", s)
			}
		})
	}
}

// The cache stays within its byte bound, evicting the least recently used entry.
func TestPrefixCacheLRU(t *testing.T) {
	c := NewPrefixCache(250)
	k := func(b byte) prefixKey { return prefixKey{b} }
	c.put(k(1), make([]byte, 100))
	c.put(k(2), make([]byte, 100))
	if c.get(k(1)) == nil { // 1 is now the most recent
		t.Fatal("entry 1 missing")
	}
	c.put(k(3), make([]byte, 100)) // evicts 2
	if c.get(k(2)) != nil || c.get(k(1)) == nil || c.get(k(3)) == nil {
		t.Error("the least recently used entry was not the one evicted")
	}
	c.put(k(4), make([]byte, 300)) // larger than the cache: not kept
	if s := c.Stats(); s.Entries != 2 || s.Bytes != 200 || s.Evictions != 1 || s.Bytes > s.Limit {
		t.Errorf("stats %+v", s)
	}
}
