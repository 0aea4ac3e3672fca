package safetensors

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
)

// Entry is one tensor to write. Data is called once, while the tensor's
// bytes are written, so a generator can produce a large checkpoint one
// tensor at a time; it must return NumElements(Shape) values.
type Entry struct {
	Name  string
	DType DType // F32, BF16 or F16
	Shape []int
	Data  func() []float32
}

// WriteFile writes entries (Write) to a new file at path.
func WriteFile(path string, entries []Entry, metadata map[string]string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	err = Write(f, entries, metadata)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Write encodes entries (in order) as a safetensors file. The header is
// padded with spaces to a multiple of 8 bytes, as the reference writer does,
// so F32 tensors can be viewed in place by Float32.
func Write(w io.Writer, entries []Entry, metadata map[string]string) error {
	header := make(map[string]any, len(entries)+1)
	if len(metadata) > 0 {
		header["__metadata__"] = metadata
	}
	var offset int64
	for _, e := range entries {
		size := int64(e.DType.Size())
		switch e.DType {
		case F32, BF16, F16:
		default:
			return fmt.Errorf("safetensors: write %q: dtype %q is not F32, BF16 or F16", e.Name, e.DType)
		}
		if _, dup := header[e.Name]; dup {
			return fmt.Errorf("safetensors: write %q: duplicate tensor name", e.Name)
		}
		n := int64(1)
		for _, d := range e.Shape {
			n *= int64(d)
		}
		header[e.Name] = map[string]any{"dtype": e.DType, "shape": e.Shape, "data_offsets": []int64{offset, offset + n*size}}
		offset += n * size
	}
	js, err := json.Marshal(header)
	if err != nil {
		return fmt.Errorf("safetensors: encode header: %w", err)
	}
	for len(js)%8 != 0 {
		js = append(js, ' ')
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(js)))
	if _, err := bw.Write(lenBuf[:]); err != nil {
		return fmt.Errorf("safetensors: write header: %w", err)
	}
	if _, err := bw.Write(js); err != nil {
		return fmt.Errorf("safetensors: write header: %w", err)
	}
	for _, e := range entries {
		if err := writeTensor(bw, e); err != nil {
			return err
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("safetensors: write: %w", err)
	}
	return nil
}

func writeTensor(w io.Writer, e Entry) error {
	want := 1
	for _, d := range e.Shape {
		want *= d
	}
	vals := e.Data()
	if len(vals) != want {
		return fmt.Errorf("safetensors: write %q: shape %v needs %d values, got %d", e.Name, e.Shape, want, len(vals))
	}
	size := e.DType.Size()
	buf := make([]byte, 0, 64<<10)
	for i, v := range vals {
		switch e.DType {
		case F32:
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
		case BF16:
			buf = binary.LittleEndian.AppendUint16(buf, Float32ToBF16(v))
		case F16:
			buf = binary.LittleEndian.AppendUint16(buf, Float32ToHalf(v))
		}
		if len(buf)+size > cap(buf) || i == len(vals)-1 {
			if _, err := w.Write(buf); err != nil {
				return fmt.Errorf("safetensors: write %q: %w", e.Name, err)
			}
			buf = buf[:0]
		}
	}
	return nil
}

// Float32ToBF16 rounds to the nearest bfloat16, ties to even; NaN stays NaN.
func Float32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// Float32ToHalf rounds to the nearest IEEE 754 binary16, ties to even,
// producing subnormals, infinities and NaN as the standard says.
func Float32ToHalf(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 31 {
		return sign | 0x7c00
	}
	if e <= 0 {
		if e < -10 {
			return sign
		}
		m := mant | 0x800000
		shift := uint(14 - e)
		h := m >> shift
		rem := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || (rem == half && h&1 == 1) {
			h++
		}
		return sign | uint16(h)
	}
	h := sign | uint16(e)<<10 | uint16(mant>>13)
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && h&1 == 1) {
		h++
	}
	return h
}
