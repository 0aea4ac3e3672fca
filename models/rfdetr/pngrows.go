package rfdetr

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/ttmodel/tt-model/models/imagemem"
)

// A non-interlaced PNG is decoded here one row at a time while it is
// pre-processed, so a picture is never held whole: Go's image/png would
// give a 16-bit 8192×8192 file (under 1 MB compressed) as a 512 MB
// NRGBA64. Only the current and previous filtered rows are kept.
//
// The rows are the ones image/png + rowRGB give for the same file (the
// tests compare every colour type and bit depth): alpha dropped, 16-bit
// samples keep their high byte, low-depth gray scaled to 8 bits, palette
// indices looked up (an index past the palette is opaque black, as
// image/png and libpng do). The chunk rules are image/png's as well: CRCs
// checked, IHDR first, PLTE before IDAT, tRNS where its colour type allows,
// consecutive IDATs, IEND after them.

// pngHeader is a checked PNG whose pixel data has not been inflated yet.
type pngHeader struct {
	width, height int
	depth, ctype  int
	interlaced    bool
	palette       [256][3]uint8 // RGB; entries past the PLTE stay black
	idat          [][]byte      // the consecutive IDAT payloads, in order
}

// parsePNG walks every chunk of data (its signature already checked),
// verifies lengths, CRCs and order, and keeps what decoding needs.
func parsePNG(data []byte) (*pngHeader, error) {
	const (
		stStart = iota
		stIHDR
		stPLTE
		stTRNS
		stIDAT
		stIEND
	)
	p := &pngHeader{}
	stage := stStart
	rest := data[len(pngMagic):]
	for stage != stIEND {
		if len(rest) < 12 {
			return nil, errors.New("unexpected end of file")
		}
		length := binary.BigEndian.Uint32(rest[:4])
		if length > 0x7fffffff || int64(length) > int64(len(rest)-12) {
			return nil, fmt.Errorf("chunk %q of %d bytes runs past the end of the file", rest[4:8], length)
		}
		typ, body := string(rest[4:8]), rest[8:8+length]
		if crc32.ChecksumIEEE(rest[4:8+length]) != binary.BigEndian.Uint32(rest[8+length:]) {
			return nil, fmt.Errorf("chunk %q: invalid checksum", typ)
		}
		rest = rest[12+length:]
		order := func(ok bool) error {
			if !ok {
				return fmt.Errorf("chunk %q out of order", typ)
			}
			return nil
		}
		var err error
		switch typ {
		case "IHDR":
			if err = order(stage == stStart); err == nil {
				err = p.parseIHDR(body)
			}
			stage = stIHDR
		case "PLTE":
			if err = order(stage == stIHDR); err == nil {
				err = p.parsePLTE(body)
			}
			stage = stPLTE
		case "tRNS":
			err = p.checkTRNS(body, stage == stIHDR, stage == stPLTE)
			stage = stTRNS
		case "IDAT":
			switch {
			case stage < stIHDR || stage > stIDAT || (stage == stIHDR && p.ctype == imagemem.PNGPaletted):
				err = order(false)
			case stage == stIDAT:
				// Trailing IDATs after the pixel data (image/png ignores them).
			default:
				p.idat = append(p.idat, body)
				// The pixel data runs on through the IDATs that follow at once.
				for len(rest) >= 12 && string(rest[4:8]) == "IDAT" {
					n := binary.BigEndian.Uint32(rest[:4])
					if n > 0x7fffffff || int64(n) > int64(len(rest)-12) {
						return nil, fmt.Errorf("chunk \"IDAT\" of %d bytes runs past the end of the file", n)
					}
					if crc32.ChecksumIEEE(rest[4:8+n]) != binary.BigEndian.Uint32(rest[8+n:]) {
						return nil, errors.New("chunk \"IDAT\": invalid checksum")
					}
					p.idat = append(p.idat, rest[8:8+n])
					rest = rest[12+n:]
				}
				stage = stIDAT
			}
		case "IEND":
			err = order(stage == stIDAT)
			stage = stIEND
		}
		if err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (p *pngHeader) parseIHDR(b []byte) error {
	if len(b) != 13 {
		return errors.New("bad IHDR length")
	}
	if b[10] != 0 || b[11] != 0 {
		return errors.New("unsupported compression or filter method")
	}
	if b[12] > 1 {
		return errors.New("invalid interlace method")
	}
	w, h := int32(binary.BigEndian.Uint32(b[0:4])), int32(binary.BigEndian.Uint32(b[4:8]))
	if w <= 0 || h <= 0 {
		return errors.New("non-positive dimension")
	}
	p.width, p.height, p.depth, p.ctype, p.interlaced = int(w), int(h), int(b[8]), int(b[9]), b[12] == 1
	depths := map[int][]int{
		imagemem.PNGGray: {1, 2, 4, 8, 16}, imagemem.PNGTrueColor: {8, 16}, imagemem.PNGPaletted: {1, 2, 4, 8},
		imagemem.PNGGrayAlpha: {8, 16}, imagemem.PNGRGBA: {8, 16},
	}
	for _, d := range depths[p.ctype] {
		if d == p.depth {
			return nil
		}
	}
	return fmt.Errorf("unsupported bit depth %d, color type %d", p.depth, p.ctype)
}

func (p *pngHeader) parsePLTE(b []byte) error {
	n := len(b) / 3
	if len(b)%3 != 0 || n <= 0 || n > 256 || n > 1<<p.depth {
		return errors.New("bad PLTE length")
	}
	switch p.ctype {
	case imagemem.PNGPaletted:
		for i := 0; i < n; i++ {
			copy(p.palette[i][:], b[3*i:3*i+3])
		}
	case imagemem.PNGTrueColor, imagemem.PNGRGBA:
		// A suggested palette: optional and ignorable (PNG spec 4.1.2).
	default:
		return errors.New("PLTE, color type mismatch")
	}
	return nil
}

// checkTRNS applies image/png's rules to a tRNS chunk. Its values only
// set alpha, which the RGB rows drop, so nothing is kept.
func (p *pngHeader) checkTRNS(b []byte, afterIHDR, afterPLTE bool) error {
	switch p.ctype {
	case imagemem.PNGPaletted:
		if !afterPLTE {
			return errors.New(`chunk "tRNS" out of order`)
		}
		if len(b) > 256 {
			return errors.New("bad tRNS length")
		}
	case imagemem.PNGTrueColor:
		if !afterIHDR && !afterPLTE {
			return errors.New(`chunk "tRNS" out of order`)
		}
		if len(b) != 6 {
			return errors.New("bad tRNS length")
		}
	case imagemem.PNGGray:
		if !afterIHDR {
			return errors.New(`chunk "tRNS" out of order`)
		}
		if len(b) != 2 {
			return errors.New("bad tRNS length")
		}
	default:
		if !afterIHDR {
			return errors.New(`chunk "tRNS" out of order`)
		}
		return errors.New("tRNS, color type mismatch")
	}
	return nil
}

// bitsPerPixel of the filtered data.
func (p *pngHeader) bitsPerPixel() int {
	return p.channels() * p.depth
}

// channels per pixel of the colour type.
func (p *pngHeader) channels() int {
	switch p.ctype {
	case imagemem.PNGTrueColor:
		return 3
	case imagemem.PNGGrayAlpha:
		return 2
	case imagemem.PNGRGBA:
		return 4
	}
	return 1
}

// pngRows inflates and unfilters a non-interlaced PNG's rows in order.
type pngRows struct {
	h         *pngHeader
	zr        io.ReadCloser
	cur, prev []byte // filter byte + one row of samples
	bpp       int    // bytes per pixel for the filters, at least 1
	y         int
}

func (p *pngHeader) rows() (*pngRows, error) {
	segs := make([]io.Reader, len(p.idat))
	for i, s := range p.idat {
		segs[i] = bytes.NewReader(s)
	}
	zr, err := zlib.NewReader(io.MultiReader(segs...))
	if err != nil {
		return nil, badImage("cannot decode png image: %v", err)
	}
	rowBytes := 1 + (p.bitsPerPixel()*p.width+7)/8
	return &pngRows{h: p, zr: zr, cur: make([]byte, rowBytes), prev: make([]byte, rowBytes),
		bpp: max(1, p.bitsPerPixel()/8)}, nil
}

// next writes the next row as interleaved 8-bit RGB into dst (3×width).
func (r *pngRows) next(dst []uint8) error {
	r.prev, r.cur = r.cur, r.prev
	if _, err := io.ReadFull(r.zr, r.cur); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return badImage("cannot decode png image: not enough pixel data (row %d of %d)", r.y, r.h.height)
		}
		return badImage("cannot decode png image: %v", err)
	}
	if err := unfilter(r.cur[0], r.cur[1:], r.prev[1:], r.bpp); err != nil {
		return err
	}
	r.h.rowRGB(r.cur[1:], dst)
	r.y++
	return nil
}

// finish checks that the compressed data ends with the last row (its
// zlib checksum verified), as image/png does.
func (r *pngRows) finish() error {
	defer r.zr.Close()
	var one [1]byte
	n, err := r.zr.Read(one[:])
	for i := 0; n == 0 && err == nil && i < 100; i++ {
		n, err = r.zr.Read(one[:])
	}
	switch {
	case n != 0:
		return badImage("cannot decode png image: too much pixel data")
	case err != nil && !errors.Is(err, io.EOF):
		return badImage("cannot decode png image: %v", err)
	}
	return nil
}

// unfilter reverses one row's filter (PNG spec 9.2) in place.
func unfilter(filter byte, cur, prev []byte, bpp int) error {
	switch filter {
	case 0: // None
	case 1: // Sub
		for i := bpp; i < len(cur); i++ {
			cur[i] += cur[i-bpp]
		}
	case 2: // Up
		for i := range cur {
			cur[i] += prev[i]
		}
	case 3: // Average
		for i := 0; i < bpp; i++ {
			cur[i] += prev[i] / 2
		}
		for i := bpp; i < len(cur); i++ {
			cur[i] += uint8((int(cur[i-bpp]) + int(prev[i])) / 2)
		}
	case 4: // Paeth
		for i := range cur {
			var a, c int
			if i >= bpp {
				a, c = int(cur[i-bpp]), int(prev[i-bpp])
			}
			cur[i] += paeth(a, int(prev[i]), c)
		}
	default:
		return badImage("cannot decode png image: bad filter type %d", filter)
	}
	return nil
}

func paeth(a, b, c int) uint8 {
	p := a + b - c
	pa, pb, pc := abs(p-a), abs(p-b), abs(p-c)
	switch {
	case pa <= pb && pa <= pc:
		return uint8(a)
	case pb <= pc:
		return uint8(b)
	}
	return uint8(c)
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// rowRGB converts one unfiltered row to interleaved 8-bit RGB, as rowRGB
// does for the image image/png would have made of it.
func (p *pngHeader) rowRGB(src, dst []uint8) {
	w := p.width
	switch {
	case p.ctype == imagemem.PNGGray && p.depth < 8, p.ctype == imagemem.PNGPaletted:
		per := 8 / p.depth // samples per byte, most significant first
		mask := uint8(1<<p.depth - 1)
		scale := uint8(0xff / mask) // 1-bit ×255, 2-bit ×0x55, 4-bit ×0x11, 8-bit ×1
		for x := 0; x < w; x++ {
			shift := uint(8 - p.depth*(x%per+1))
			v := src[x/per] >> shift & mask
			if p.ctype == imagemem.PNGPaletted {
				copy(dst[3*x:3*x+3], p.palette[v][:])
			} else {
				g := v * scale
				dst[3*x], dst[3*x+1], dst[3*x+2] = g, g, g
			}
		}
	default:
		// 8- or 16-bit samples; 16-bit ones keep their high (first) byte.
		channels := p.channels()
		step := p.depth / 8
		pix := channels * step
		for x := 0; x < w; x++ {
			s := src[x*pix:]
			if channels <= 2 { // gray (+ alpha)
				g := s[0]
				dst[3*x], dst[3*x+1], dst[3*x+2] = g, g, g
			} else {
				dst[3*x], dst[3*x+1], dst[3*x+2] = s[0], s[step], s[2*step]
			}
		}
	}
}
