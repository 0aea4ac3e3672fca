package rfdetr

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"image"
	"image/png"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/ttmodel/tt-model/models/imagemem"
)

// testPNG describes a PNG the test encoder writes: any colour type and bit
// depth, a filter chosen per row, the pixel data split over several IDATs.
// image/png's encoder covers few of these, so the test writes its own.
type testPNG struct {
	w, h, ctype, depth int
	palette            int  // PLTE entries (paletted), fewer than the indices reach
	trns               bool // add a tRNS chunk
	idats              int  // IDAT chunks to split the data into
	seed               uint64
}

func (tp testPNG) String() string {
	return fmt.Sprintf("ct%d-d%d-%dx%d-plte%d-trns%v-idat%d", tp.ctype, tp.depth, tp.w, tp.h, tp.palette, tp.trns, tp.idats)
}

func chunk(buf *bytes.Buffer, typ string, data []byte) {
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(data)))
	buf.Write(n[:])
	c := crc32.NewIEEE()
	c.Write([]byte(typ))
	c.Write(data)
	buf.WriteString(typ)
	buf.Write(data)
	binary.BigEndian.PutUint32(n[:], c.Sum32())
	buf.Write(n[:])
}

// filterRow applies filter f (PNG spec 9.2) to raw given the previous raw row.
func filterRow(f byte, raw, prev []byte, bpp int) []byte {
	out := make([]byte, len(raw))
	for i := range raw {
		var a, c int
		if i >= bpp {
			a, c = int(raw[i-bpp]), int(prev[i-bpp])
		}
		b := int(prev[i])
		var pred int
		switch f {
		case 1:
			pred = a
		case 2:
			pred = b
		case 3:
			pred = (a + b) / 2
		case 4:
			pred = int(paeth(a, b, c))
		}
		out[i] = raw[i] - uint8(pred)
	}
	return out
}

func (tp testPNG) encode() []byte {
	rng := rand.New(rand.NewPCG(tp.seed, 7))
	h := &pngHeader{width: tp.w, height: tp.h, ctype: tp.ctype, depth: tp.depth}
	rowBytes := (h.bitsPerPixel()*tp.w + 7) / 8
	bpp := max(1, h.bitsPerPixel()/8)
	var raw bytes.Buffer
	prev := make([]byte, rowBytes)
	for y := 0; y < tp.h; y++ {
		row := make([]byte, rowBytes)
		for i := range row {
			row[i] = uint8(rng.UintN(256))
		}
		f := byte(y % 5)
		raw.WriteByte(f)
		raw.Write(filterRow(f, row, prev, bpp))
		prev = row
	}
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	zw.Write(raw.Bytes())
	zw.Close()

	var out bytes.Buffer
	out.Write(pngMagic)
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], uint32(tp.w))
	binary.BigEndian.PutUint32(ihdr[4:], uint32(tp.h))
	ihdr[8], ihdr[9] = byte(tp.depth), byte(tp.ctype)
	chunk(&out, "IHDR", ihdr)
	if tp.ctype == imagemem.PNGPaletted || (tp.palette > 0 && tp.ctype == imagemem.PNGTrueColor) {
		plte := make([]byte, 3*tp.palette)
		for i := range plte {
			plte[i] = uint8(rng.UintN(256))
		}
		chunk(&out, "PLTE", plte)
	}
	if tp.trns {
		switch tp.ctype {
		case imagemem.PNGGray:
			chunk(&out, "tRNS", []byte{0, 1})
		case imagemem.PNGTrueColor:
			chunk(&out, "tRNS", []byte{0, 1, 0, 2, 0, 3})
		case imagemem.PNGPaletted:
			chunk(&out, "tRNS", []byte{0, 128})
		}
	}
	chunk(&out, "tEXt", []byte("Comment\x00ignored"))
	data := z.Bytes()
	for i := 0; i < tp.idats; i++ {
		chunk(&out, "IDAT", data[i*len(data)/tp.idats:(i+1)*len(data)/tp.idats])
	}
	chunk(&out, "IEND", nil)
	return out.Bytes()
}

// streamRows decodes every row of a PNG through pngRows.
func streamRows(t *testing.T, data []byte) ([]uint8, error) {
	t.Helper()
	pic, err := DecodePicture(data, nil)
	if err != nil {
		return nil, err
	}
	if !pic.Streamed() {
		t.Fatalf("a non-interlaced PNG was not streamed")
	}
	rows, err := pic.png.rows()
	if err != nil {
		return nil, err
	}
	out := make([]uint8, 3*pic.Width*pic.Height)
	for y := 0; y < pic.Height; y++ {
		if err := rows.next(out[3*pic.Width*y:]); err != nil {
			return nil, err
		}
	}
	return out, rows.finish()
}

// goRows decodes with image/png and converts with rowRGB: the rows the
// streamed decoder must reproduce.
func goRows(data []byte) ([]uint8, error) {
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	b := img.Bounds()
	out := make([]uint8, 3*b.Dx()*b.Dy())
	for y := 0; y < b.Dy(); y++ {
		rowRGB(img, b.Min.Y+y, out[3*b.Dx()*y:])
	}
	return out, nil
}

// Every colour type and bit depth, every filter, odd widths (partial bytes
// at low depths), palettes shorter than the indices, tRNS, split IDATs:
// the streamed rows equal image/png's, byte for byte.
func TestStreamedPNGRowsEqualImagePNG(t *testing.T) {
	var cases []testPNG
	depths := map[int][]int{imagemem.PNGGray: {1, 2, 4, 8, 16}, imagemem.PNGTrueColor: {8, 16}, imagemem.PNGPaletted: {1, 2, 4, 8}, imagemem.PNGGrayAlpha: {8, 16}, imagemem.PNGRGBA: {8, 16}}
	seed := uint64(1)
	for ct, ds := range depths {
		for _, d := range ds {
			for _, size := range [][2]int{{1, 1}, {13, 7}, {64, 33}} {
				tp := testPNG{w: size[0], h: size[1], ctype: ct, depth: d, idats: 1 + int(seed%3), seed: seed}
				if ct == imagemem.PNGPaletted {
					tp.palette = max(1, (1<<d)*2/3) // some indices fall past the palette
				}
				tp.trns = ct == imagemem.PNGGray || ct == imagemem.PNGTrueColor || ct == imagemem.PNGPaletted
				cases = append(cases, tp)
				seed++
			}
		}
	}
	cases = append(cases, testPNG{w: 9, h: 4, ctype: imagemem.PNGTrueColor, depth: 8, palette: 5, idats: 2, seed: 99}) // suggested palette
	for _, tp := range cases {
		t.Run(tp.String(), func(t *testing.T) {
			data := tp.encode()
			want, err := goRows(data)
			if err != nil {
				t.Fatalf("image/png: %v", err)
			}
			got, err := streamRows(t, data)
			if err != nil {
				t.Fatalf("streamed: %v", err)
			}
			if !bytes.Equal(got, want) {
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("byte %d (row %d): got %d, want %d", i, i/(3*tp.w), got[i], want[i])
					}
				}
			}
		})
	}
	// image/png's own encoder's output (its filter choices, one IDAT) too.
	for _, img := range []image.Image{testImage(37, 21), image.NewGray16(image.Rect(0, 0, 5, 3)), image.NewNRGBA64(image.Rect(0, 0, 4, 4))} {
		data := encodePNG(t, img)
		want, _ := goRows(data)
		got, err := streamRows(t, data)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%T: streamed rows differ from image/png's (err %v)", img, err)
		}
	}
}

// Broken files are refused by both decoders; the streamed one says why
// with a *BadImageError, before any pixel when the chunks are wrong.
func TestStreamedPNGRefusesBrokenFiles(t *testing.T) {
	good := testPNG{w: 16, h: 8, ctype: imagemem.PNGRGBA, depth: 8, idats: 2, seed: 5}.encode()
	flip := func(off int) []byte {
		b := bytes.Clone(good)
		b[off] ^= 0x40
		return b
	}
	// Offsets: the IHDR CRC, a byte inside the first IDAT's deflate data
	// (with its CRC fixed, so only the pixel data is wrong).
	idat := bytes.Index(good, []byte("IDAT"))
	badPixels := bytes.Clone(good)
	n := int(binary.BigEndian.Uint32(badPixels[idat-4:]))
	badPixels[idat+4+n/2] ^= 0xff
	binary.BigEndian.PutUint32(badPixels[idat+4+n:], crc32.ChecksumIEEE(badPixels[idat:idat+4+n]))
	noIEND := good[:len(good)-12]
	short := testPNG{w: 16, h: 8, ctype: imagemem.PNGRGBA, depth: 8, idats: 1, seed: 5}.encode()
	// A header claiming 9 rows over data holding 8: not enough pixel data.
	binary.BigEndian.PutUint32(short[8+8+4:], 9)
	binary.BigEndian.PutUint32(short[8+8+13:], crc32.ChecksumIEEE(short[8+4:8+8+13]))

	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"IHDR checksum", flip(8 + 8 + 2), "checksum"},
		{"corrupt deflate data", badPixels, "cannot decode png image"},
		{"missing IEND", noIEND, "unexpected end of file"},
		{"not enough pixel data", short, "not enough pixel data"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := goRows(c.data); err == nil {
				t.Fatalf("image/png accepts the file: the case is wrong")
			}
			_, err := streamRows(t, c.data)
			var bad *BadImageError
			if !errors.As(err, &bad) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("streamed decode: %v, want a BadImageError with %q", err, c.want)
			}
		})
	}
}

// The attack of the hardening review: a 16-bit 8192×8192 PNG compresses to
// well under a megabyte and decodes with image/png into a 512 MB NRGBA64.
// Pre-processing it streamed allocates the 3×8192×560 float intermediate
// and a few rows, not the picture.
func TestStreamedPNGBoundsMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes a 8192×8192 picture: skipped with -short")
	}
	const side = MaxImageSide
	// Written row by row (image/png's encoder would need the 512 MB image).
	var z bytes.Buffer
	zw, _ := zlib.NewWriterLevel(&z, zlib.BestSpeed)
	row := make([]byte, 1+side*8) // filter 0, RGBA 16-bit
	for y := 0; y < side; y++ {
		for x := 0; x < side; x += 64 {
			binary.BigEndian.PutUint16(row[1+8*x:], uint16(x*8))
			binary.BigEndian.PutUint16(row[1+8*x+2:], uint16(y*8))
		}
		zw.Write(row)
	}
	zw.Close()
	var buf bytes.Buffer
	buf.Write(pngMagic)
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], side)
	binary.BigEndian.PutUint32(ihdr[4:], side)
	ihdr[8], ihdr[9] = 16, imagemem.PNGRGBA
	chunk(&buf, "IHDR", ihdr)
	chunk(&buf, "IDAT", z.Bytes())
	chunk(&buf, "IEND", nil)
	data := buf.Bytes()
	pic, err := DecodePicture(data, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !pic.Streamed() {
		t.Fatal("not streamed")
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if err := Preprocess(pic, make([]float32, PixelCount)); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	intermediate := uint64(3 * side * InputSize * 4)
	t.Logf("%d-byte PNG %dx%d 16-bit: pre-processing allocated %.1f MB (intermediate %.1f MB; image/png would hold %.0f MB)",
		len(data), side, side, float64(allocated)/1e6, float64(intermediate)/1e6, float64(side*side*8)/1e6)
	if limit := intermediate + 16<<20; allocated > limit {
		t.Fatalf("pre-processing allocated %d bytes, want at most %d (the intermediate + 16 MiB)", allocated, limit)
	}
}
