package safetensors

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"
)

func ramp(n int, scale float32) func() []float32 {
	return func() []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = (float32(i) - float32(n)/2) * scale
		}
		return v
	}
}

func writeFile(t *testing.T, entries []Entry, meta map[string]string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "model.safetensors")
	fd, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := Write(fd, entries, meta); err != nil {
		t.Fatal(err)
	}
	if err := fd.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRoundTrip(t *testing.T) {
	entries := []Entry{
		{Name: "a.f32", DType: F32, Shape: []int{3, 5}, Data: ramp(15, 0.37)},
		{Name: "b.bf16", DType: BF16, Shape: []int{7}, Data: ramp(7, 0.5)}, // exact in bf16
		{Name: "c.f16", DType: F16, Shape: []int{2, 2, 2}, Data: ramp(8, 0.25)},
		{Name: "d.empty", DType: F32, Shape: []int{0, 4}, Data: ramp(0, 1)},
		{Name: "e.scalar", DType: F32, Shape: []int{}, Data: func() []float32 { return []float32{42} }},
	}
	path := writeFile(t, entries, map[string]string{"format": "pt"})
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := f.Metadata()["format"]; got != "pt" {
		t.Errorf("metadata format = %q, want pt", got)
	}
	if got, want := strings.Join(f.Names(), ","), "a.f32,b.bf16,c.f16,d.empty,e.scalar"; got != want {
		t.Errorf("names = %s, want %s", got, want)
	}
	for _, e := range entries {
		info, ok := f.Info(e.Name)
		if !ok {
			t.Fatalf("%s missing", e.Name)
		}
		if info.DType != e.DType || len(info.Shape) != len(e.Shape) {
			t.Errorf("%s: info %+v, want dtype %s shape %v", e.Name, info, e.DType, e.Shape)
		}
		got, err := f.Float32(e.Name)
		if err != nil {
			t.Fatalf("%s: %v", e.Name, err)
		}
		want := e.Data()
		if len(got) != len(want) {
			t.Fatalf("%s: %d values, want %d", e.Name, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s[%d] = %v, want %v", e.Name, i, got[i], want[i])
			}
		}
	}
}

func TestFloat32IsZeroCopyForAlignedF32(t *testing.T) {
	path := writeFile(t, []Entry{{Name: "w", DType: F32, Shape: []int{4}, Data: ramp(4, 1)}}, nil)
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	raw, _ := f.Bytes("w")
	vals, err := f.Float32("w")
	if err != nil {
		t.Fatal(err)
	}
	if unsafe.Pointer(&raw[0]) != unsafe.Pointer(&vals[0]) {
		t.Error("F32 tensor was copied; want a view of the mapping")
	}
}

func TestHalfConversions(t *testing.T) {
	cases := []struct {
		h uint16
		f float32
	}{
		{0x0000, 0}, {0x3c00, 1}, {0xc000, -2}, {0x7bff, 65504}, {0x0001, float32(math.Ldexp(1, -24))},
		{0x03ff, float32(math.Ldexp(1023, -24))}, {0x0400, float32(math.Ldexp(1, -14))}, {0x3555, 0.333251953125},
		{0x7c00, float32(math.Inf(1))}, {0xfc00, float32(math.Inf(-1))},
	}
	for _, c := range cases {
		if got := HalfToFloat32(c.h); got != c.f {
			t.Errorf("HalfToFloat32(%#04x) = %v, want %v", c.h, got, c.f)
		}
		if got := Float32ToHalf(c.f); got != c.h {
			t.Errorf("Float32ToHalf(%v) = %#04x, want %#04x", c.f, got, c.h)
		}
	}
	if !math.IsNaN(float64(HalfToFloat32(0x7e00))) {
		t.Error("0x7e00 should be NaN")
	}
	// Every half value survives a round trip through float32.
	for h := 0; h < 1<<16; h++ {
		f := HalfToFloat32(uint16(h))
		if math.IsNaN(float64(f)) {
			continue
		}
		if back := Float32ToHalf(f); back != uint16(h) {
			t.Fatalf("round trip %#04x -> %v -> %#04x", h, f, back)
		}
	}
	// Ties go to even: 1 + 2^-11 is halfway between 1 and 1+2^-10.
	if got := Float32ToHalf(1 + float32(math.Ldexp(1, -11))); got != 0x3c00 {
		t.Errorf("tie rounded to %#04x, want 0x3c00", got)
	}
	if got := Float32ToBF16(1 + float32(math.Ldexp(1, -8))); got != 0x3f80 {
		t.Errorf("bf16 tie rounded to %#04x, want 0x3f80", got)
	}
	if got := Float32ToBF16(1 + 3*float32(math.Ldexp(1, -8))); got != 0x3f82 {
		t.Errorf("bf16 tie rounded to %#04x, want 0x3f82 (even)", got)
	}
}

// rawFile frames header JSON and data as a safetensors file.
func rawFile(header string, data []byte) []byte {
	var b bytes.Buffer
	_ = binary.Write(&b, binary.LittleEndian, uint64(len(header)))
	b.WriteString(header)
	b.Write(data)
	return b.Bytes()
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		name string
		buf  []byte
		want string
	}{
		{"short", []byte{1, 2, 3}, "shorter than the 8-byte header length"},
		{"header past end", append(binary.LittleEndian.AppendUint64(nil, 50), '{', '}'), "runs past the end"},
		{"header too big", binary.LittleEndian.AppendUint64(nil, 1<<40), "exceeds the"},
		{"bad json", rawFile(`{"a":`, nil), "header JSON"},
		{"not an object", rawFile(`[1,2]`, nil), "header JSON"},
		{"bad metadata", rawFile(`{"__metadata__":{"a":1}}`, nil), "__metadata__"},
		{"unknown dtype", rawFile(`{"w":{"dtype":"Q7","shape":[1],"data_offsets":[0,4]}}`, make([]byte, 4)), `tensor "w": unknown dtype "Q7"`},
		{"offsets count", rawFile(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[0]}}`, make([]byte, 4)), `tensor "w": data_offsets has 1 values`},
		{"offsets past end", rawFile(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, make([]byte, 4)), `tensor "w": data_offsets [0, 8] outside`},
		{"size mismatch", rawFile(`{"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, make([]byte, 8)), `tensor "w": F32[3] needs 12 bytes but data_offsets span 8`},
		{"negative dim", rawFile(`{"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}}`, nil), `tensor "w": invalid dimension -1`},
		{"overflow", rawFile(`{"w":{"dtype":"F32","shape":[2147483647,2147483647,2147483647],"data_offsets":[0,0]}}`, nil), "overflows"},
		{"overlap", rawFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, make([]byte, 8)), "overlap"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := FromBytes("bad.safetensors", c.buf)
			if err == nil {
				t.Fatalf("no error, want %q", c.want)
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "bad.safetensors") {
				t.Errorf("error %q does not name the file and contain %q", err, c.want)
			}
		})
	}
}

func TestFloat32Errors(t *testing.T) {
	f, err := FromBytes("x.safetensors", rawFile(`{"i":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}}`, make([]byte, 8)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Float32("i"); err == nil || !strings.Contains(err.Error(), `tensor "i": dtype I64 cannot be converted`) {
		t.Errorf("I64 conversion error = %v", err)
	}
	if _, err := f.Float32("nope"); err == nil || !strings.Contains(err.Error(), `no tensor "nope"`) {
		t.Errorf("missing tensor error = %v", err)
	}
	_ = f.Close()
	if _, err := f.Bytes("i"); err == nil {
		t.Error("read after Close succeeded")
	}
}

func FuzzFromBytes(f *testing.F) {
	f.Add(rawFile(`{"w":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}}`, make([]byte, 4)))
	f.Add(rawFile(`{"__metadata__":{"k":"v"},"w":{"dtype":"BF16","shape":[1,1],"data_offsets":[0,2]}}`, make([]byte, 2)))
	f.Fuzz(func(t *testing.T, buf []byte) {
		file, err := FromBytes("fuzz", buf)
		if err != nil {
			return
		}
		for _, n := range file.Names() {
			_, _ = file.Float32(n)
		}
	})
}

func TestReleaseKeepsViewsReadable(t *testing.T) {
	n := 3 * os.Getpagesize() // spans whole pages, so some are really dropped
	path := writeFile(t, []Entry{{Name: "big", DType: F32, Shape: []int{n}, Data: ramp(n, 0.5)},
		{Name: "small", DType: F32, Shape: []int{3}, Data: ramp(3, 1)}}, nil)
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	v, _ := f.Float32("big")
	before := append([]float32(nil), v...)
	if err := f.Release("big"); err != nil {
		t.Fatal(err)
	}
	for i := range before {
		if v[i] != before[i] {
			t.Fatalf("value %d changed after Release: %v != %v", i, v[i], before[i])
		}
	}
	if err := f.Release("absent"); err != nil {
		t.Errorf("Release of an unknown tensor: %v", err)
	}
}
