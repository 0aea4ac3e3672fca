package pi05

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/tinylib/msgp/msgp"
)

// msgpack bodies with numpy arrays, as openpi_client.msgpack_numpy and SGLang's action API write them:
// an ndarray is a map with BIN keys {__ndarray__: true, data: bin (C order), dtype: "<f4" | "|u1" | …,
// shape: [ints]}, a numpy scalar {__npgeneric__: true, data: value, dtype}. (Readers also take str
// keys, as SGLang's unpacker does.)
//
// Decoding is lazy and zero-copy over the body: a map is its keys plus the raw bytes of each value,
// and a value is read when a handler asks for it, by the type it expects. Every declared length is
// checked against the bytes that remain before anything is sized from it (tinylib/msgp's *Bytes
// readers do so for strings, bins and the headers; array lengths are checked here), and nesting is
// bounded, so a hostile body costs at most about its own size and never a deep recursion.

// mpMaxDepth bounds the nesting of any msgpack value (an HxWx3 list image is 4 deep).
const mpMaxDepth = 32

// wireError is a malformed or mistyped value: Key names it in the request ("input.observation.state").
type wireError struct {
	Key, Msg string
}

func (e *wireError) Error() string {
	if e.Key == "" {
		return e.Msg
	}
	return e.Key + ": " + e.Msg
}

func wireErr(key, format string, args ...any) *wireError {
	return &wireError{Key: key, Msg: fmt.Sprintf(format, args...)}
}

// describe turns a msgp error into words.
func describe(err error) string {
	var te msgp.TypeError
	switch {
	case errors.Is(err, msgp.ErrShortBytes):
		return "truncated msgpack (a length runs past the end of the body)"
	case errors.As(err, &te):
		return fmt.Sprintf("want %s, got %s", te.Method, te.Encoded)
	}
	return err.Error()
}

func joinKey(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

// skipValue returns what follows the value at the start of b, refusing nesting past mpMaxDepth.
func skipValue(b []byte, key string, depth int) ([]byte, error) {
	if depth > mpMaxDepth {
		return nil, wireErr(key, "nested deeper than %d levels", mpMaxDepth)
	}
	switch msgp.NextType(b) {
	case msgp.MapType:
		n, rest, err := msgp.ReadMapHeaderBytes(b)
		if err != nil {
			return nil, wireErr(key, "%s", describe(err))
		}
		if uint64(n)*2 > uint64(len(rest)) {
			return nil, wireErr(key, "map of %d entries in %d bytes: truncated", n, len(rest))
		}
		for i := uint32(0); i < n; i++ {
			inner := key // the value's key, when the map's key is text
			if k, _, err := msgp.ReadMapKeyZC(rest); err == nil {
				inner = joinKey(key, string(k))
			}
			if rest, err = skipValue(rest, key, depth+1); err != nil {
				return nil, err
			}
			if rest, err = skipValue(rest, inner, depth+1); err != nil {
				return nil, err
			}
		}
		return rest, nil
	case msgp.ArrayType:
		n, rest, err := msgp.ReadArrayHeaderBytes(b)
		if err != nil {
			return nil, wireErr(key, "%s", describe(err))
		}
		if uint64(n) > uint64(len(rest)) {
			return nil, wireErr(key, "array of %d items in %d bytes: truncated", n, len(rest))
		}
		for i := uint32(0); i < n; i++ {
			if rest, err = skipValue(rest, key, depth+1); err != nil {
				return nil, err
			}
		}
		return rest, nil
	}
	rest, err := msgp.Skip(b) // a scalar, str, bin or ext: no recursion
	if err != nil {
		return nil, wireErr(key, "%s", describe(err))
	}
	return rest, nil
}

// mpMap is a decoded map: its keys (str or bin) and each value's raw bytes, in body order.
type mpMap struct {
	key  string // where the map is in the request
	keys []string
	vals [][]byte
}

// readMap decodes the map at the start of raw; depth is its nesting level in the body.
func readMap(raw []byte, key string, depth int) (mpMap, error) {
	m := mpMap{key: key}
	if depth > mpMaxDepth {
		return m, wireErr(key, "nested deeper than %d levels", mpMaxDepth)
	}
	n, rest, err := msgp.ReadMapHeaderBytes(raw)
	if err != nil {
		return m, wireErr(key, "want a map: %s", describe(err))
	}
	if uint64(n)*2 > uint64(len(rest)) {
		return m, wireErr(key, "map of %d entries in %d bytes: truncated", n, len(rest))
	}
	m.keys, m.vals = make([]string, 0, n), make([][]byte, 0, n)
	for i := uint32(0); i < n; i++ {
		k, after, err := msgp.ReadMapKeyZC(rest)
		if err != nil {
			return m, wireErr(key, "key %d: %s (keys are str or bin)", i, describe(err))
		}
		end, err := skipValue(after, joinKey(key, string(k)), depth+1)
		if err != nil {
			return m, err
		}
		m.keys = append(m.keys, string(k))
		m.vals = append(m.vals, after[:len(after)-len(end)])
		rest = end
	}
	if len(rest) != 0 && depth == 0 {
		return m, wireErr(key, "%d bytes after the top-level map", len(rest))
	}
	return m, nil
}

// get returns the raw value of key (nil, false when absent or nil).
func (m mpMap) get(key string) ([]byte, bool) {
	for i, k := range m.keys {
		if k == key {
			if msgp.IsNil(m.vals[i]) {
				return nil, false
			}
			return m.vals[i], true
		}
	}
	return nil, false
}

// at names key inside m.
func (m mpMap) at(key string) string { return joinKey(m.key, key) }

// sub decodes key's value as a map; ok is false when absent.
func (m mpMap) sub(key string, depth int) (mpMap, bool, error) {
	raw, ok := m.get(key)
	if !ok {
		return mpMap{key: m.at(key)}, false, nil
	}
	s, err := readMap(raw, m.at(key), depth)
	return s, true, err
}

// ---- numpy ----

// npDtype is a numpy dtype string: byte order, kind, item size ("<f4", "|u1", ">i2", "|b1").
type npDtype struct {
	str   string
	kind  byte // b, i, u, f
	size  int
	order binary.ByteOrder
}

func parseDtype(s string) (npDtype, error) {
	d := npDtype{str: s, order: binary.LittleEndian}
	if len(s) < 3 {
		return d, fmt.Errorf("dtype %q is not a numpy dtype string like \"<f4\"", s)
	}
	switch s[0] {
	case '<', '|', '=':
	case '>':
		d.order = binary.BigEndian
	default:
		return d, fmt.Errorf("dtype %q: unknown byte order %q", s, s[0])
	}
	d.kind = s[1]
	var size int
	if _, err := fmt.Sscanf(s[2:], "%d", &size); err != nil || fmt.Sprint(size) != s[2:] {
		return d, fmt.Errorf("dtype %q: bad item size", s)
	}
	d.size = size
	ok := false
	switch d.kind {
	case 'b':
		ok = size == 1
	case 'i', 'u':
		ok = size == 1 || size == 2 || size == 4 || size == 8
	case 'f':
		ok = size == 2 || size == 4 || size == 8
	}
	if !ok {
		return d, fmt.Errorf("dtype %q is not a bool, integer or float type this server reads (|b1, |i1…<i8, |u1…<u8, <f2, <f4, <f8)", s)
	}
	return d, nil
}

// value returns item i of data as a float64 (exact for every type but 64-bit integers past 2^53).
func (d npDtype) value(data []byte, i int) float64 {
	b := data[i*d.size : (i+1)*d.size]
	switch d.kind {
	case 'b', 'u':
		switch d.size {
		case 1:
			return float64(b[0])
		case 2:
			return float64(d.order.Uint16(b))
		case 4:
			return float64(d.order.Uint32(b))
		}
		return float64(d.order.Uint64(b))
	case 'i':
		switch d.size {
		case 1:
			return float64(int8(b[0]))
		case 2:
			return float64(int16(d.order.Uint16(b)))
		case 4:
			return float64(int32(d.order.Uint32(b)))
		}
		return float64(int64(d.order.Uint64(b)))
	}
	switch d.size {
	case 2:
		return float64(halfToFloat32(d.order.Uint16(b)))
	case 4:
		return float64(math.Float32frombits(d.order.Uint32(b)))
	}
	return math.Float64frombits(d.order.Uint64(b))
}

// halfToFloat32 widens an IEEE 754 binary16 (numpy float16) exactly.
func halfToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // inf, nan
		return math.Float32frombits(sign | 0xff<<23 | frac<<13)
	case exp == 0 && frac == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: frac * 2^-24
		v := float32(frac) / (1 << 24)
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+112)<<23 | frac<<13)
}

// ndarray is a decoded numpy array: Data aliases the body.
type ndarray struct {
	dtype npDtype
	shape []int
	data  []byte
}

func (a ndarray) len() int {
	n := 1
	for _, s := range a.shape {
		n *= s
	}
	return n
}

// isNumpyMap reports whether m is a msgpack-numpy array or scalar map.
func isNumpyMap(m mpMap) (array, scalar bool) {
	for _, k := range m.keys {
		switch k {
		case "__ndarray__":
			array = true
		case "__npgeneric__":
			scalar = true
		}
	}
	return array, scalar
}

// maxArrayItems bounds an ndarray's shape: far above any body's bytes, far below where a product of
// dimensions wraps.
const maxArrayItems = 1 << 40

// readNDArray decodes an ndarray map, checking that data holds exactly prod(shape) items.
func readNDArray(m mpMap) (ndarray, error) {
	var a ndarray
	raw, ok := m.get("dtype")
	if !ok {
		return a, wireErr(m.key, "ndarray without dtype")
	}
	ds, err := readText(raw, m.at("dtype"))
	if err != nil {
		return a, err
	}
	if a.dtype, err = parseDtype(ds); err != nil {
		return a, wireErr(m.at("dtype"), "%v", err)
	}
	raw, ok = m.get("shape")
	if !ok {
		return a, wireErr(m.key, "ndarray without shape")
	}
	n, rest, err := msgp.ReadArrayHeaderBytes(raw)
	if err != nil || n > 8 {
		return a, wireErr(m.at("shape"), "want a list of at most 8 dimensions")
	}
	items := uint64(1)
	for i := uint32(0); i < n; i++ {
		var s int64
		if s, rest, err = msgp.ReadInt64Bytes(rest); err != nil || s < 0 {
			return a, wireErr(m.at("shape"), "dimension %d is not a non-negative integer", i)
		}
		// Each dimension is bounded on its own too: after a 0 the product no longer grows, and a
		// huge dimension beside it would still reach the code that indexes by dimensions.
		if s > maxArrayItems || s > 0 && items > maxArrayItems/uint64(s) {
			return a, wireErr(m.at("shape"), "dimension %d (%d) makes more than %d items", i, s, uint64(maxArrayItems))
		}
		items *= uint64(s)
		a.shape = append(a.shape, int(s))
	}
	raw, ok = m.get("data")
	if !ok {
		return a, wireErr(m.key, "ndarray without data")
	}
	if a.data, _, err = msgp.ReadBytesZC(raw); err != nil {
		if a.data, _, err = msgp.ReadStringZC(raw); err != nil { // a str-typed data field (raw=True packers)
			return a, wireErr(m.at("data"), "want bin: %s", describe(err))
		}
	}
	if uint64(len(a.data)) != items*uint64(a.dtype.size) {
		return a, wireErr(m.at("data"), "%d bytes, shape %v of %s needs %d", len(a.data), a.shape, a.dtype.str, items*uint64(a.dtype.size))
	}
	return a, nil
}

// readText reads a str (or a bin holding text).
func readText(raw []byte, key string) (string, error) {
	if v, _, err := msgp.ReadStringZC(raw); err == nil {
		return string(v), nil
	}
	v, _, err := msgp.ReadBytesZC(raw)
	if err != nil {
		return "", wireErr(key, "want a string: %s", describe(err))
	}
	return string(v), nil
}

// readScalar reads a number: an int, float or bool, or a numpy scalar map.
func readScalar(raw []byte, key string) (float64, error) {
	switch msgp.NextType(raw) {
	case msgp.IntType:
		v, _, err := msgp.ReadInt64Bytes(raw)
		return float64(v), wrapWire(err, key)
	case msgp.UintType:
		v, _, err := msgp.ReadUint64Bytes(raw)
		return float64(v), wrapWire(err, key)
	case msgp.Float64Type:
		v, _, err := msgp.ReadFloat64Bytes(raw)
		return v, wrapWire(err, key)
	case msgp.Float32Type:
		v, _, err := msgp.ReadFloat32Bytes(raw)
		return float64(v), wrapWire(err, key)
	case msgp.BoolType:
		v, _, err := msgp.ReadBoolBytes(raw)
		if v {
			return 1, wrapWire(err, key)
		}
		return 0, wrapWire(err, key)
	case msgp.MapType:
		m, err := readMap(raw, key, 1)
		if err != nil {
			return 0, err
		}
		if _, scalar := isNumpyMap(m); scalar {
			d, ok := m.get("data")
			if !ok {
				return 0, wireErr(key, "numpy scalar without data")
			}
			return readScalar(d, m.at("data"))
		}
		if arr, _ := isNumpyMap(m); arr {
			a, err := readNDArray(m)
			if err != nil {
				return 0, err
			}
			if a.len() != 1 {
				return 0, wireErr(key, "want a number, got an array of shape %v", a.shape)
			}
			return a.dtype.value(a.data, 0), nil
		}
	}
	return 0, wireErr(key, "want a number, got %s", msgp.NextType(raw))
}

func wrapWire(err error, key string) error {
	if err != nil {
		return wireErr(key, "%s", describe(err))
	}
	return nil
}

// readInt reads a whole number (an integral float or a numpy integer scalar is accepted).
func readInt(raw []byte, key string) (int, error) {
	v, err := readScalar(raw, key)
	if err != nil {
		return 0, err
	}
	if v != math.Trunc(v) || math.Abs(v) > 1<<31 {
		return 0, wireErr(key, "%v is not an integer", v)
	}
	return int(v), nil
}

// readBool reads a bool; SGLang's runtime switches also take "true"/"false"/"auto" strings, which
// come back as def for "auto".
func readBool(raw []byte, key string, def bool) (bool, error) {
	if msgp.NextType(raw) == msgp.StrType {
		s, _ := readText(raw, key)
		switch strings.ToLower(s) {
		case "auto":
			return def, nil
		case "true", "1", "yes":
			return true, nil
		case "false", "0", "no":
			return false, nil
		}
		return false, wireErr(key, "%q is not true, false or \"auto\"", s)
	}
	v, err := readScalar(raw, key)
	return v != 0, err
}

// numbers is a decoded numeric array: values in C order and the shape.
type numbers struct {
	vals  []float64
	shape []int
}

// readNumbers reads an ndarray, a numpy scalar, a number, or nested lists of numbers; at most max
// values (checked before any is stored).
func readNumbers(raw []byte, key string, max int) (numbers, error) {
	switch msgp.NextType(raw) {
	case msgp.MapType:
		m, err := readMap(raw, key, 1)
		if err != nil {
			return numbers{}, err
		}
		if arr, _ := isNumpyMap(m); arr {
			a, err := readNDArray(m)
			if err != nil {
				return numbers{}, err
			}
			if a.len() > max {
				return numbers{}, wireErr(key, "%d values, at most %d", a.len(), max)
			}
			out := numbers{vals: make([]float64, a.len()), shape: a.shape}
			for i := range out.vals {
				out.vals[i] = a.dtype.value(a.data, i)
			}
			return out, nil
		}
		v, err := readScalar(raw, key)
		return numbers{vals: []float64{v}}, err
	case msgp.ArrayType:
		var out numbers
		err := readNested(raw, key, 0, &out.shape, func(b []byte) ([]byte, error) {
			if len(out.vals) >= max {
				return nil, wireErr(key, "more than %d values", max)
			}
			v, err := readScalar(b, key)
			if err != nil {
				return nil, err
			}
			out.vals = append(out.vals, v)
			return msgp.Skip(b)
		})
		return out, err
	}
	v, err := readScalar(raw, key)
	return numbers{vals: []float64{v}}, err
}

// readNested walks nested lists of equal lengths (shape is filled on the way down, then checked),
// calling leaf on each innermost element; leaf returns the bytes after the element.
func readNested(raw []byte, key string, depth int, shape *[]int, leaf func([]byte) ([]byte, error)) error {
	w := nestedWalk{key: key, shape: shape, leaf: leaf}
	_, err := w.walk(raw, depth)
	return err
}

type nestedWalk struct {
	key    string
	shape  *[]int
	leaf   func([]byte) ([]byte, error)
	leaves bool // a value was seen: the shape is complete
}

func (w *nestedWalk) walk(b []byte, depth int) ([]byte, error) {
	if depth > 8 {
		return nil, wireErr(w.key, "lists nested deeper than 8")
	}
	shape := *w.shape
	if msgp.NextType(b) != msgp.ArrayType {
		if depth != len(shape) {
			return nil, wireErr(w.key, "ragged nested lists: a value at depth %d, lists go %d deep", depth, len(shape))
		}
		w.leaves = true
		return w.leaf(b)
	}
	n, rest, err := msgp.ReadArrayHeaderBytes(b)
	if err != nil {
		return nil, wireErr(w.key, "%s", describe(err))
	}
	if uint64(n) > uint64(len(rest)) {
		return nil, wireErr(w.key, "list of %d items in %d bytes: truncated", n, len(rest))
	}
	switch {
	case depth == len(shape) && !w.leaves:
		*w.shape = append(shape, int(n))
	case depth >= len(shape):
		return nil, wireErr(w.key, "ragged nested lists: a list at depth %d, values at depth %d", depth, len(shape))
	case shape[depth] != int(n):
		return nil, wireErr(w.key, "ragged nested lists: %d items at depth %d, another list there has %d", n, depth, shape[depth])
	}
	for i := uint32(0); i < n; i++ {
		if rest, err = w.walk(rest, depth+1); err != nil {
			return nil, err
		}
	}
	return rest, nil
}

// ---- writing ----

// npArray is an array written as a msgpack-numpy ndarray: BIN keys, data in C order.
type npArray struct {
	dtype string
	shape []int
	data  []byte
}

// MarshalMsg implements msgp.Marshaler, so msgp.AppendIntf writes it inside any map.
func (a npArray) MarshalMsg(b []byte) ([]byte, error) {
	b = msgp.AppendMapHeader(b, 4)
	b = msgp.AppendBytes(b, []byte("__ndarray__"))
	b = msgp.AppendBool(b, true)
	b = msgp.AppendBytes(b, []byte("data"))
	b = msgp.AppendBytes(b, a.data)
	b = msgp.AppendBytes(b, []byte("dtype"))
	b = msgp.AppendString(b, a.dtype)
	b = msgp.AppendBytes(b, []byte("shape"))
	b = msgp.AppendArrayHeader(b, uint32(len(a.shape)))
	for _, s := range a.shape {
		b = msgp.AppendInt(b, s)
	}
	return b, nil
}

// float32Array is values as a "<f4" ndarray of the given shape.
func float32Array(values []float32, shape ...int) npArray {
	data := make([]byte, 0, 4*len(values))
	for _, v := range values {
		data = binary.LittleEndian.AppendUint32(data, math.Float32bits(v))
	}
	return npArray{dtype: "<f4", shape: shape, data: data}
}

// matrixArray is rows of equal length as an [rows, cols] float32 ndarray.
func matrixArray(rows [][]float32) npArray {
	cols := 0
	if len(rows) > 0 {
		cols = len(rows[0])
	}
	flat := make([]float32, 0, len(rows)*cols)
	for _, r := range rows {
		flat = append(flat, r...)
	}
	return float32Array(flat, len(rows), cols)
}

// packMsgpack encodes a response value (maps, lists, numbers, strings, npArray).
func packMsgpack(v any) ([]byte, error) {
	return msgp.AppendIntf(make([]byte, 0, 1024), v)
}
