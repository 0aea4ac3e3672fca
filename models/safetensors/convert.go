package safetensors

import (
	"encoding/binary"
	"fmt"
	"math"
)

// decodeFloat32 converts little-endian raw elements of dtype dt into dst,
// which holds exactly one value per element.
func decodeFloat32(dst []float32, raw []byte, dt DType) error {
	switch dt {
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
	case BF16:
		// bf16 is the top half of an f32: widening is exact.
		for i := range dst {
			dst[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(raw[2*i:])) << 16)
		}
	case F16:
		for i := range dst {
			dst[i] = HalfToFloat32(binary.LittleEndian.Uint16(raw[2*i:]))
		}
	default:
		return fmt.Errorf("dtype %s cannot be converted to float32 (want F32, BF16 or F16)", dt)
	}
	return nil
}

// HalfToFloat32 widens an IEEE 754 binary16 value exactly, including
// subnormals, infinities and NaN payloads.
func HalfToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // inf or NaN
		return math.Float32frombits(sign | 0xff<<23 | mant<<13)
	case exp != 0: // normal: rebias 15 -> 127
		return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
	case mant == 0: // signed zero
		return math.Float32frombits(sign)
	}
	// subnormal: normalise the mantissa into an f32 normal
	e := uint32(113)
	for mant&0x400 == 0 {
		mant <<= 1
		e--
	}
	return math.Float32frombits(sign | e<<23 | (mant&0x3ff)<<13)
}
