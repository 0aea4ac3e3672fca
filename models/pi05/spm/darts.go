package spm

import (
	"encoding/binary"
	"fmt"
)

// doubleArray is a read-only view of a darts-clone double-array trie, the structure SentencePiece
// stores in NormalizerSpec.precompiled_charsmap. Each unit is a little-endian uint32:
// bits 0-7 label (bit 31 set marks a leaf whose low 31 bits are the value), bit 8 "has leaf",
// bit 9 selects an offset shift of 8, bits 10-31 the offset.
type doubleArray struct {
	units []uint32
}

func newDoubleArray(blob []byte) (*doubleArray, error) {
	if len(blob)%4 != 0 || len(blob) == 0 {
		return nil, fmt.Errorf("double-array of %d bytes is not a whole number of units", len(blob))
	}
	units := make([]uint32, len(blob)/4)
	for i := range units {
		units[i] = binary.LittleEndian.Uint32(blob[4*i:])
	}
	return &doubleArray{units: units}, nil
}

func unitOffset(u uint32) uint32 { return (u >> 10) << ((u & (1 << 9)) >> 6) }
func unitLabel(u uint32) uint32  { return u & ((1 << 31) | 0xFF) }
func unitHasLeaf(u uint32) bool  { return (u>>8)&1 == 1 }
func unitValue(u uint32) uint32  { return u & ((1 << 31) - 1) }

// longestPrefix returns the value and byte length of the longest key that is a prefix of s
// (length 0 when none). The first of several equally long matches wins, as in SentencePiece.
func (d *doubleArray) longestPrefix(s string) (value int, length int) {
	id := unitOffset(d.units[0])
	for i := 0; i < len(s); i++ {
		id ^= uint32(s[i])
		if int(id) >= len(d.units) {
			return value, length
		}
		u := d.units[id]
		if unitLabel(u) != uint32(s[i]) {
			return value, length
		}
		id ^= unitOffset(u)
		if unitHasLeaf(u) {
			if int(id) >= len(d.units) {
				return value, length
			}
			if i+1 > length {
				value, length = int(unitValue(d.units[id])), i+1
			}
		}
	}
	return value, length
}
