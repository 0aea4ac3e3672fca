package pi05

import "testing"

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
