package pi05

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/tinylib/msgp/msgp"
)

// npScalar is a numpy scalar ({__npgeneric__: true, data: item, dtype}).
type npScalar struct {
	dtype string
	item  any
}

func (s npScalar) MarshalMsg(b []byte) ([]byte, error) {
	b = msgp.AppendMapHeader(b, 3)
	b = msgp.AppendBytes(b, []byte("__npgeneric__"))
	b = msgp.AppendBool(b, true)
	b = msgp.AppendBytes(b, []byte("data"))
	b, err := msgp.AppendIntf(b, s.item)
	if err != nil {
		return nil, err
	}
	b = msgp.AppendBytes(b, []byte("dtype"))
	return msgp.AppendString(b, s.dtype), nil
}

func mustPack(t testing.TB, v any) []byte {
	t.Helper()
	b, err := packMsgpack(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// encodeItems writes values as dtype's bytes (what numpy's tobytes gives).
func encodeItems(t *testing.T, dtype string, vals []float64) []byte {
	t.Helper()
	var order binary.AppendByteOrder = binary.LittleEndian
	if dtype[0] == '>' {
		order = binary.BigEndian
	}
	var out []byte
	for _, v := range vals {
		switch dtype[1:] {
		case "b1", "u1":
			out = append(out, uint8(v))
		case "i1":
			out = append(out, uint8(int8(v)))
		case "i2":
			out = order.AppendUint16(out, uint16(int16(v)))
		case "u2":
			out = order.AppendUint16(out, uint16(v))
		case "i4":
			out = order.AppendUint32(out, uint32(int32(v)))
		case "u4":
			out = order.AppendUint32(out, uint32(v))
		case "i8":
			out = order.AppendUint64(out, uint64(int64(v)))
		case "u8":
			out = order.AppendUint64(out, uint64(v))
		case "f2":
			out = order.AppendUint16(out, float16Bits(float32(v)))
		case "f4":
			out = order.AppendUint32(out, math.Float32bits(float32(v)))
		case "f8":
			out = order.AppendUint64(out, math.Float64bits(v))
		default:
			t.Fatalf("dtype %s", dtype)
		}
	}
	return out
}

// float16Bits encodes the half-precision values the tests use (normal numbers exactly representable).
func float16Bits(f float32) uint16 {
	b := math.Float32bits(f)
	if f == 0 {
		return uint16(b>>16) & 0x8000
	}
	return uint16(b>>16)&0x8000 | uint16((b>>23&0xff)-112)<<10 | uint16(b>>13)&0x3ff
}

// Every dtype the numpy convention carries for numbers decodes to the values packed, for arrays,
// numpy scalars and plain msgpack numbers.
func TestMsgpackNumpyDtypes(t *testing.T) {
	for _, tc := range []struct {
		dtype string
		vals  []float64
	}{
		{"|b1", []float64{1, 0, 1}},
		{"|u1", []float64{0, 7, 255}},
		{"|i1", []float64{-128, 0, 127}},
		{"<u2", []float64{0, 65535, 3}},
		{"<i2", []float64{-32768, 5, 32767}},
		{">i2", []float64{-2, 300, 7}},
		{"<u4", []float64{0, 4e9, 1}},
		{"<i4", []float64{-2e9, 0, 2e9}},
		{"<u8", []float64{0, 1 << 52, 9}},
		{"<i8", []float64{-(1 << 52), 0, 1 << 40}},
		{"<f2", []float64{-2.5, 0.125, 1024}},
		{"<f4", []float64{-1.5, 0.1, 3.4e38}},
		{">f4", []float64{-1.5, 0.25, 1e-30}},
		{"<f8", []float64{-1e300, 0.1, math.Pi}},
		{">f8", []float64{2, -0.5, math.E}},
	} {
		t.Run(tc.dtype, func(t *testing.T) {
			want := tc.vals
			if tc.dtype[1] == 'f' && tc.dtype[2] == '4' {
				for i, v := range want {
					want[i] = float64(float32(v))
				}
			}
			body := mustPack(t, map[string]any{"x": npArray{tc.dtype, []int{1, 3}, encodeItems(t, tc.dtype, tc.vals)}})
			n, err := readNumbers(packedValue(t, body, "x"), "x", 10)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(n.vals) != fmt.Sprint(want) || fmt.Sprint(n.shape) != "[1 3]" {
				t.Errorf("got %v shape %v, want %v [1 3]", n.vals, n.shape, want)
			}
			s, err := readScalar(mustPack(t, npScalar{tc.dtype, tc.vals[1]}), "s")
			if err != nil || s != tc.vals[1] {
				t.Errorf("numpy scalar: %v %v, want %v", s, err, tc.vals[1])
			}
		})
	}
	// Plain msgpack numbers and nested lists (output_format "list" clients).
	n, err := readNumbers(mustPack(t, []any{[]any{1, 2.5}, []any{int64(-3), float32(0.5)}}), "l", 10)
	if err != nil || fmt.Sprint(n.vals, n.shape) != "[1 2.5 -3 0.5] [2 2]" {
		t.Errorf("nested lists: %v %v %v", n.vals, n.shape, err)
	}
}

// The float32 arrays the server writes read back bit for bit (including NaN payloads and -0).
func TestMsgpackFloat32RoundTrip(t *testing.T) {
	vals := []float32{0, float32(math.Copysign(0, -1)), 1.5, -3.25e-38, math.MaxFloat32, math.Float32frombits(0x7fc00001)}
	body := mustPack(t, map[string]any{"actions": float32Array(vals, 2, 3)})
	am, err := readMap(packedValue(t, body, "actions"), "actions", 1)
	if err != nil {
		t.Fatal(err)
	}
	a, err := readNDArray(am)
	if err != nil {
		t.Fatal(err)
	}
	if a.dtype.str != "<f4" || fmt.Sprint(a.shape) != "[2 3]" {
		t.Fatalf("dtype %s shape %v", a.dtype.str, a.shape)
	}
	for i, v := range vals {
		if got := binary.LittleEndian.Uint32(a.data[4*i:]); got != math.Float32bits(v) {
			t.Errorf("value %d: bits %08x, want %08x", i, got, math.Float32bits(v))
		}
	}
	// The numpy keys are BIN, as Python clients test b"__ndarray__" in obj.
	if !strings.Contains(string(body), "\xc4\x0b__ndarray__") {
		t.Error("__ndarray__ is not a bin key")
	}
}

// hugeBin is a bin32 header declaring n bytes with only a few behind it.
func hugeHeader(lead byte, n uint32) []byte {
	return append(binary.BigEndian.AppendUint32([]byte{lead}, n), 1, 2, 3)
}

// Malformed bodies: each is refused with the key named, quickly, and without allocating what a
// header declares.
func TestMsgpackMalformed(t *testing.T) {
	deepArrays := append([]byte{0x81, 0xa1, 'a'}, []byte(strings.Repeat("\x91", 100000))...)
	deepArrays = append(deepArrays, 0x01)
	deepMaps := []byte{0x81, 0xa1, 'b'}
	for range 50000 {
		deepMaps = append(deepMaps, 0x81, 0xa1, 'k')
	}
	deepMaps = append(deepMaps, 0x01)
	withKey := func(key string, value []byte) []byte {
		b := msgp.AppendMapHeader(nil, 1)
		b = msgp.AppendString(b, key)
		return append(b, value...)
	}
	nd := func(dtype string, shape []int, data []byte) []byte {
		return mustPack(t, map[string]any{"state": npArray{dtype, shape, data}})
	}
	for _, tc := range []struct {
		name string
		body []byte
		want string
	}{
		{"empty", nil, "want a map"},
		{"not a map", mustPack(t, []any{1, 2}), "want a map"},
		{"truncated", mustPack(t, map[string]any{"task": "pick up the cup"})[:8], "task"},
		{"1 GB bin", withKey("image", hugeHeader(0xc6, 1<<30)), "image: truncated"},
		{"1 GB str", withKey("task", hugeHeader(0xdb, 1<<30)), "task: truncated"},
		{"4G-item array", withKey("state", hugeHeader(0xdd, 0xffffffff)), "state: array of 4294967295 items"},
		{"4G-entry map", withKey("obs", hugeHeader(0xdf, 0xffffffff)), "obs: map of 4294967295 entries"},
		{"deep arrays", deepArrays, "a: nested deeper than 32"},
		{"deep maps", deepMaps, "nested deeper than 32"},
		{"trailing bytes", append(mustPack(t, map[string]any{"a": 1}), 0xc0), "after the top-level map"},
		{"int key", []byte{0x81, 0x01, 0x02}, "key 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := readMap(tc.body, "", 0)
			runtime.ReadMemStats(&after)
			var we *wireError
			if err == nil || !errors.As(err, &we) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
				t.Errorf("decoding allocated %d bytes", grew)
			}
		})
	}
	// Values that parse as msgpack but are not what the key holds.
	for _, tc := range []struct {
		name string
		body []byte
		want string
	}{
		{"data size", nd("<f4", []int{2, 3}, make([]byte, 20)), "state.data: 20 bytes, shape [2 3] of <f4 needs 24"},
		{"dtype", nd("<c8", []int{1}, make([]byte, 8)), "state.dtype"},
		{"object dtype", nd("|O", []int{1}, make([]byte, 8)), "state.dtype"},
		{"shape overflow", nd("|u1", []int{1 << 30, 1 << 30, 1 << 30}, nil), "state.shape"},
		{"shape wraps to 0", nd("|u1", []int{1 << 32, 1 << 32, 3}, nil), "state.shape: dimension 1 (4294967296) makes more than"},
		{"huge dimension beside 0", nd("|u1", []int{0, 1 << 41}, nil), "state.shape: dimension 1"},
		{"too many", nd("<f4", []int{2000}, make([]byte, 8000)), "state: 2000 values, at most 1024"},
		{"string state", mustPack(t, map[string]any{"state": "high"}), "state: want a number, got str"},
		{"ragged", mustPack(t, map[string]any{"state": []any{[]any{1, 2}, []any{3}}}), "state: ragged"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := readNumbers(packedValue(t, tc.body, "state"), "state", maxStateValues); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// packedValue reads body as a msgpack map and returns the raw value of key
// (nil when there is none).
func packedValue(t *testing.T, body []byte, key string) []byte {
	t.Helper()
	m, err := readMap(body, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := m.get(key)
	return raw
}

// Arbitrary bytes never panic the readers; whatever decodes is consistent.
func FuzzMsgpackNumpy(f *testing.F) {
	f.Add([]byte{0x81, 0xa1, 'x', 0x93, 1, 2, 3})
	f.Add(mustPack(f, map[string]any{"x": npArray{"<f4", []int{2}, make([]byte, 8)}}))
	f.Add(mustPack(f, map[string]any{"x": npArray{"|u1", []int{2, 2, 3}, make([]byte, 12)}}))
	f.Add(mustPack(f, map[string]any{"x": []any{[]any{[]any{1, 2, 3}}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := readMap(b, "", 0)
		if err != nil {
			return
		}
		for i := range m.keys {
			if n, err := readNumbers(m.vals[i], "x", 1<<16); err == nil {
				total := 1
				for _, s := range n.shape {
					total *= s
				}
				if len(n.shape) > 0 && total != len(n.vals) {
					t.Fatalf("shape %v with %d values", n.shape, len(n.vals))
				}
			}
			if img, err := readFrame(m.vals[i], "x", false, nil); err == nil && len(img.Pix) != 3*img.H*img.W {
				t.Fatalf("%dx%d frame with %d values", img.H, img.W, len(img.Pix))
			}
		}
	})
}
