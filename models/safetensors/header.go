// Package safetensors reads .safetensors checkpoints through mmap: the JSON
// header is parsed and checked once, tensors are zero-copy views of the
// mapping, and conversion to float32 happens one tensor at a time so a
// loader never holds more than one converted tensor beyond what it keeps.
//
// Format (https://huggingface.co/docs/safetensors): 8 bytes little-endian
// header length N, N bytes of JSON {name: {dtype, shape, data_offsets}},
// optional "__metadata__" {string: string}, then the data section; offsets
// are relative to the start of the data section.
package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"sort"
)

// maxHeaderBytes bounds the JSON header as the reference implementation does
// (100 MB), so a corrupt length cannot make us allocate gigabytes.
const maxHeaderBytes = 100 << 20

// DType is a safetensors element type name as written in the header.
type DType string

// The element types this package knows the size of. Only F32, BF16 and F16
// convert to float32; the others can be listed and viewed as bytes.
const (
	F32  DType = "F32"
	BF16 DType = "BF16"
	F16  DType = "F16"
	F64  DType = "F64"
	I64  DType = "I64"
	I32  DType = "I32"
	I16  DType = "I16"
	I8   DType = "I8"
	U8   DType = "U8"
	U16  DType = "U16"
	U32  DType = "U32"
	U64  DType = "U64"
	BOOL DType = "BOOL"
	F8E4 DType = "F8_E4M3"
	F8E5 DType = "F8_E5M2"
)

// Size returns the byte size of one element, or 0 for an unknown type.
func (d DType) Size() int {
	switch d {
	case F64, I64, U64:
		return 8
	case F32, I32, U32:
		return 4
	case BF16, F16, I16, U16:
		return 2
	case I8, U8, BOOL, F8E4, F8E5:
		return 1
	}
	return 0
}

// TensorInfo describes one tensor of a file.
type TensorInfo struct {
	Name  string
	DType DType
	Shape []int
	// Begin and End are byte offsets relative to the data section.
	Begin, End int64
}

// NumElements is the product of the shape (1 for a scalar).
func (t TensorInfo) NumElements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= int64(d)
	}
	return n
}

type rawEntry struct {
	DType       string  `json:"dtype"`
	Shape       []int64 `json:"shape"`
	DataOffsets []int64 `json:"data_offsets"`
}

// parseHeader checks the framing of buf (a whole file) and returns the tensor
// table, the metadata and the offset of the data section. Every check names
// the tensor it failed on.
func parseHeader(buf []byte) (map[string]TensorInfo, map[string]string, int64, error) {
	if len(buf) < 8 {
		return nil, nil, 0, fmt.Errorf("file is %d bytes, shorter than the 8-byte header length", len(buf))
	}
	n := binary.LittleEndian.Uint64(buf[:8])
	if n > maxHeaderBytes {
		return nil, nil, 0, fmt.Errorf("header length %d exceeds the %d-byte limit", n, maxHeaderBytes)
	}
	if n > uint64(len(buf)-8) {
		return nil, nil, 0, fmt.Errorf("header length %d runs past the end of the %d-byte file", n, len(buf))
	}
	dataStart := int64(8 + n)
	dataLen := int64(len(buf)) - dataStart

	var raw map[string]json.RawMessage
	if err := json.Unmarshal(buf[8:dataStart], &raw); err != nil {
		return nil, nil, 0, fmt.Errorf("header JSON: %w", err)
	}
	var meta map[string]string
	if m, ok := raw["__metadata__"]; ok {
		if err := json.Unmarshal(m, &meta); err != nil {
			return nil, nil, 0, fmt.Errorf("header __metadata__ must map strings to strings: %w", err)
		}
		delete(raw, "__metadata__")
	}

	tensors := make(map[string]TensorInfo, len(raw))
	for name, msg := range raw {
		var e rawEntry
		if err := json.Unmarshal(msg, &e); err != nil {
			return nil, nil, 0, fmt.Errorf("tensor %q: header entry: %w", name, err)
		}
		t, err := checkEntry(name, e, dataLen)
		if err != nil {
			return nil, nil, 0, err
		}
		tensors[name] = t
	}
	if err := checkOverlap(tensors); err != nil {
		return nil, nil, 0, err
	}
	return tensors, meta, dataStart, nil
}

func checkEntry(name string, e rawEntry, dataLen int64) (TensorInfo, error) {
	dt := DType(e.DType)
	size := dt.Size()
	if size == 0 {
		return TensorInfo{}, fmt.Errorf("tensor %q: unknown dtype %q", name, e.DType)
	}
	if len(e.DataOffsets) != 2 {
		return TensorInfo{}, fmt.Errorf("tensor %q: data_offsets has %d values, want 2", name, len(e.DataOffsets))
	}
	begin, end := e.DataOffsets[0], e.DataOffsets[1]
	if begin < 0 || end < begin || end > dataLen {
		return TensorInfo{}, fmt.Errorf("tensor %q: data_offsets [%d, %d] outside the %d-byte data section", name, begin, end, dataLen)
	}
	shape := make([]int, len(e.Shape))
	elems := int64(1)
	for i, d := range e.Shape {
		if d < 0 || d > math.MaxInt32 {
			return TensorInfo{}, fmt.Errorf("tensor %q: invalid dimension %d in shape %v", name, d, e.Shape)
		}
		shape[i] = int(d)
		if d != 0 && elems > math.MaxInt64/d/int64(size) {
			return TensorInfo{}, fmt.Errorf("tensor %q: shape %v overflows", name, e.Shape)
		}
		elems *= d
	}
	if want := elems * int64(size); want != end-begin {
		return TensorInfo{}, fmt.Errorf("tensor %q: %s%v needs %d bytes but data_offsets span %d", name, dt, shape, want, end-begin)
	}
	return TensorInfo{Name: name, DType: dt, Shape: shape, Begin: begin, End: end}, nil
}

// checkOverlap rejects files whose tensors share bytes: a view of one would
// silently alias another.
func checkOverlap(tensors map[string]TensorInfo) error {
	list := make([]TensorInfo, 0, len(tensors))
	for _, t := range tensors {
		if t.End > t.Begin {
			list = append(list, t)
		}
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Begin < list[j].Begin })
	for i := 1; i < len(list); i++ {
		if list[i].Begin < list[i-1].End {
			return fmt.Errorf("tensors %q and %q overlap in the data section", list[i-1].Name, list[i].Name)
		}
	}
	return nil
}
