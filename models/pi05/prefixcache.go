package pi05

import (
	"container/list"
	"crypto/sha256"
	"encoding/binary"
	"math"
	"sync"
	"time"
)

// PrefixCache is the exact full-prefix cache (SGLang's global prefix cache): a request whose
// pre-processed images (after resize and scaling), camera mask, prompt tokens and token mask are
// identical to an earlier one's reuses that request's per-layer K/V and skips VISION and PREFIX.
// There is no partial reuse: pi0.5 attends bidirectionally over images and text, so any change moves
// every deeper layer's K/V. Entries are saved prefixes (Program.SavePrefix): they load into a slab
// of any program of the policy's kernels, whichever device ran the miss. Bounded in bytes, least
// recently used out first; safe for concurrent use.
type PrefixCache struct {
	limit int64

	mu      sync.Mutex
	bytes   int64
	order   *list.List // of *prefixEntry, most recently used first
	entries map[prefixKey]*list.Element
	stats   PrefixCacheStats
}

// prefixKey is the SHA-256 of everything the prefix depends on.
type prefixKey [sha256.Size]byte

type prefixEntry struct {
	key  prefixKey
	blob []byte
}

// PrefixCacheStats are the counters /metrics reports.
type PrefixCacheStats struct {
	Hits, Misses, Evictions uint64
	Entries                 int
	Bytes, Limit            int64
}

// NewPrefixCache holds at most limit bytes of saved prefixes.
func NewPrefixCache(limit int64) *PrefixCache {
	return &PrefixCache{limit: limit, order: list.New(), entries: map[prefixKey]*list.Element{}}
}

// Stats returns the counters so far.
func (c *PrefixCache) Stats() PrefixCacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Entries, s.Bytes, s.Limit = c.order.Len(), c.bytes, c.limit
	return s
}

// keyOf hashes the prefix inputs of a prepared request, each with its length so that no two
// different inputs hash the same byte stream.
func keyOf(in *Prepared) prefixKey {
	h := sha256.New()
	var b [8]byte
	put := func(v uint64) {
		binary.LittleEndian.PutUint64(b[:], v)
		h.Write(b[:])
	}
	put(uint64(len(in.Images)))
	buf := make([]byte, 0, 4096)
	for _, v := range in.Images {
		buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
		if len(buf) == cap(buf) {
			h.Write(buf)
			buf = buf[:0]
		}
	}
	h.Write(buf)
	bools := func(v []bool) {
		put(uint64(len(v)))
		for _, x := range v {
			if x {
				h.Write([]byte{1})
			} else {
				h.Write([]byte{0})
			}
		}
	}
	bools(in.CameraMask)
	put(uint64(len(in.Tokens)))
	for _, t := range in.Tokens {
		put(uint64(uint32(t)))
	}
	bools(in.TokenMask)
	var k prefixKey
	h.Sum(k[:0])
	return k
}

// get returns the saved prefix for k (nil when absent), now the most recently used.
func (c *PrefixCache) get(k prefixKey) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	if !ok {
		return nil
	}
	c.order.MoveToFront(e)
	return e.Value.(*prefixEntry).blob
}

// count records one lookup's outcome.
func (c *PrefixCache) count(hit bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if hit {
		c.stats.Hits++
	} else {
		c.stats.Misses++
	}
}

// put stores blob under k, evicting the least recently used entries to stay within the limit; a blob
// larger than the whole cache is not kept.
func (c *PrefixCache) put(k prefixKey, blob []byte) {
	size := int64(len(blob))
	c.mu.Lock()
	defer c.mu.Unlock()
	if size > c.limit {
		return
	}
	if _, ok := c.entries[k]; ok { // two misses of one prefix ran at once
		return
	}
	for c.bytes+size > c.limit {
		last := c.order.Back()
		old := last.Value.(*prefixEntry)
		c.order.Remove(last)
		delete(c.entries, old.key)
		c.bytes -= int64(len(old.blob))
		c.stats.Evictions++
	}
	c.entries[k] = c.order.PushFront(&prefixEntry{key: k, blob: blob})
	c.bytes += size
}

// prefix leaves in's prefix K/V in slab: loaded from the cache on a hit, else computed by VISION and
// PREFIX (and saved when the request may use the cache). The timing of a hit is all PREFIX (the load).
func (p *Policy) prefix(prog Program, slab Slab, in *Prepared, t *Timing) (hit bool, err error) {
	cache := p.Cache
	if !in.PrefixCache {
		cache = nil
	}
	var key prefixKey
	t0 := time.Now()
	if cache != nil {
		key = keyOf(in)
		// A blob this slab cannot take (another device's preset holds fewer rows) is a miss.
		if blob := cache.get(key); blob != nil && prog.LoadPrefix(slab, blob) == nil {
			cache.count(true)
			t.Prefix = time.Since(t0)
			return true, nil
		}
		cache.count(false)
	}
	if err := prog.Vision(slab, in.Images, in.CameraMask); err != nil {
		return false, err
	}
	t1 := time.Now()
	if err := prog.Prefix(slab, in.Tokens, in.TokenMask); err != nil {
		return false, err
	}
	if cache != nil {
		blob, err := prog.SavePrefix(slab)
		if err != nil {
			return false, err
		}
		cache.put(key, blob)
	}
	t.Vision, t.Prefix = t1.Sub(t0), time.Since(t1)
	return false, nil
}
