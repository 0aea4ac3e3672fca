// Package imagemem tells, from a PNG or JPEG file's header alone, how much memory Go's image/png
// or image/jpeg will allocate to decode it whole, so a server can refuse (or budget) a picture
// before a single pixel is decoded. A file of a few hundred kilobytes can declare a picture that
// decodes into a gigabyte: a progressive 4:4:4 JPEG of 8192×8192 keeps 64 int32 coefficients per
// 8×8 block of each component (805 MB) besides the 201 MB YCbCr picture; an interlaced 16-bit
// RGBA PNG decodes into a 512 MB NRGBA64 plus its seven pass images.
//
// The counts follow the decoders' own allocations (image/png readImagePass and decode,
// image/jpeg makeImg, processSOS and the CMYK / RGB conversions), padded sizes included; the
// decoders' small fixed buffers (a row, Huffman tables) are not counted.
package imagemem

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// MaxDecodeBytes is the most memory a single picture may take to decode whole: a picture whose
// header asks for more is refused before its pixels are read. It admits an 8192×8192 baseline
// 4:2:0 JPEG (96 MiB) and a 12-megapixel progressive 4:2:0 one (87 MiB); the per-layout pixel
// limits it implies are Header.MaxPixels.
const MaxDecodeBytes = 128 << 20

// The files' signatures.
var (
	pngMagic  = []byte("\x89PNG\r\n\x1a\n")
	jpegMagic = []byte{0xff, 0xd8}
)

// Format names a file's format by its signature: "png", "jpeg", or "" for anything else.
func Format(data []byte) string {
	switch {
	case bytes.HasPrefix(data, pngMagic):
		return "png"
	case bytes.HasPrefix(data, jpegMagic):
		return "jpeg"
	}
	return ""
}

// Header is what a PNG or JPEG header says about decoding the picture whole.
type Header struct {
	Format        string // "png" or "jpeg"
	Width, Height int
	// Layout describes what drives the cost, e.g. "interlaced 16-bit RGBA" or "progressive 4:4:4".
	Layout string
	// Interlaced is an Adam7 PNG (a non-interlaced one can be decoded row by row instead).
	Interlaced bool
	// DecodeBytes is what image/png or image/jpeg allocates for this picture: the decoded image,
	// a PNG's pass images, a progressive JPEG's coefficients, a CMYK or RGB JPEG's converted copy.
	DecodeBytes int64
}

// MaxPixels is the largest pixel count a picture of this layout may have for its decode, plus
// keepPerPixel bytes per pixel the caller makes of it (3 for an RGB copy), to fit in limit bytes.
func (h Header) MaxPixels(limit, keepPerPixel int64) int64 {
	perPixel := float64(h.DecodeBytes)/float64(h.Width)/float64(h.Height) + float64(keepPerPixel)
	return int64(float64(limit) / perPixel)
}

// Cost is the memory the decode takes when the caller keeps keepPerPixel more bytes per pixel.
func (h Header) Cost(keepPerPixel int64) int64 {
	return h.DecodeBytes + keepPerPixel*int64(h.Width)*int64(h.Height)
}

// CheckCost returns nil when Cost(keepPerPixel) fits in MaxDecodeBytes, else an error that says
// what the picture would take and how many pixels a picture of its layout may have.
func (h Header) CheckCost(keepPerPixel int64) error {
	if c := h.Cost(keepPerPixel); c > MaxDecodeBytes {
		return fmt.Errorf("%s image is %dx%d %s: decoding it takes %d MiB, more than the %d MiB allowed per image (%s %s pictures may have at most %.1f megapixels)",
			h.Format, h.Width, h.Height, h.Layout, (c+1<<20-1)>>20, MaxDecodeBytes>>20, h.Layout, strings.ToUpper(h.Format),
			float64(h.MaxPixels(MaxDecodeBytes, keepPerPixel))/1e6)
	}
	return nil
}

// Budget is the memory a server lets its requests hold. A decoder calls Reserve before it
// allocates (an error says why not and is passed on as is) and Release for bytes that are garbage
// again. A nil Budget takes everything.
type Budget interface {
	Reserve(n int64) error
	Release(n int64)
}

// ReadHeader reads the header of a PNG or JPEG file (the format by its signature) and what
// decoding it whole costs. It reads only the chunks or segments before the pixel data; an error
// names what is wrong with them.
func ReadHeader(data []byte) (Header, error) {
	switch Format(data) {
	case "png":
		return pngHeader(data)
	case "jpeg":
		return jpegHeader(data)
	}
	return Header{}, errors.New("not a PNG or JPEG file")
}

// PNG colour types (PNG spec 11.2.2), as IHDR's colour type byte holds them; package rfdetr's
// PNG decoder reads the same byte.
const (
	PNGGray      = 0
	PNGTrueColor = 2
	PNGPaletted  = 3
	PNGGrayAlpha = 4
	PNGRGBA      = 6
)

// pngHeader reads IHDR and looks for tRNS before the first IDAT: image/png decodes gray and
// truecolor pictures with a transparent colour into NRGBA / NRGBA64 instead of Gray / RGBA.
func pngHeader(data []byte) (Header, error) {
	rest := data[len(pngMagic):]
	if len(rest) < 8+13+4 || string(rest[4:8]) != "IHDR" || binary.BigEndian.Uint32(rest[:4]) != 13 {
		return Header{}, errors.New("png: no IHDR chunk first")
	}
	ihdr := rest[8 : 8+13]
	w, h := int32(binary.BigEndian.Uint32(ihdr[0:4])), int32(binary.BigEndian.Uint32(ihdr[4:8]))
	if w <= 0 || h <= 0 {
		return Header{}, fmt.Errorf("png: non-positive dimension %dx%d", w, h)
	}
	depth, ctype, interlaced := int(ihdr[8]), int(ihdr[9]), ihdr[12] == 1
	transparent := false
	for rest = rest[8+13+4:]; len(rest) >= 8; {
		n := binary.BigEndian.Uint32(rest[:4])
		typ := string(rest[4:8])
		if typ == "IDAT" || typ == "IEND" || uint64(n)+12 > uint64(len(rest)) {
			break
		}
		transparent = transparent || typ == "tRNS"
		rest = rest[12+n:]
	}
	// Bytes per pixel of the image type image/png decodes into.
	var bpp int64
	var kind string
	switch ctype {
	case PNGGray:
		kind, bpp = "gray", 1
	case PNGTrueColor:
		kind, bpp = "RGB", 4
	case PNGPaletted:
		kind, bpp = "paletted", 1
	case PNGGrayAlpha:
		kind, bpp = "gray+alpha", 4
	case PNGRGBA:
		kind, bpp = "RGBA", 4
	default:
		return Header{}, fmt.Errorf("png: unknown color type %d", ctype)
	}
	if transparent && ctype == PNGGray {
		bpp = 4 // NRGBA
	}
	if depth == 16 {
		bpp = 8 // Gray16 is 2, every other 16-bit type 8
		if ctype == PNGGray && !transparent {
			bpp = 2
		}
	}
	pixels := int64(w) * int64(h)
	cost := pixels * bpp
	layout := fmt.Sprintf("%d-bit %s", depth, kind)
	if interlaced {
		// The full image, plus the seven pass images merged into it (together as large again),
		// each garbage only once merged.
		cost *= 2
		layout = "interlaced " + layout
	}
	return Header{Format: "png", Width: int(w), Height: int(h), Layout: layout, Interlaced: interlaced, DecodeBytes: cost}, nil
}

// JPEG markers.
const (
	mSOF0  = 0xc0 // baseline
	mSOF1  = 0xc1 // extended sequential
	mSOF2  = 0xc2 // progressive
	mDHT   = 0xc4
	mRST0  = 0xd0
	mRST7  = 0xd7
	mSOI   = 0xd8
	mEOI   = 0xd9
	mSOS   = 0xda
	mAPP0  = 0xe0
	mAPP14 = 0xee
)

type jpegComponent struct{ id, h, v int }

// jpegHeader walks the segments up to the first SOS: the frame header (SOF0/1/2, the ones
// image/jpeg decodes) and the APP0 JFIF / APP14 Adobe markers that decide whether a 3-component
// picture is YCbCr (kept as is) or RGB (converted into an RGBA copy).
func jpegHeader(data []byte) (Header, error) {
	var (
		comps         []jpegComponent
		w, h          int
		progressive   bool
		jfif, adobe   bool
		adobeXform    byte
		sawFrame      bool
		pos           = 2
		segmentLength = func() (int, error) {
			if pos+4 > len(data) {
				return 0, errors.New("jpeg: the file ends inside a segment header")
			}
			n := int(binary.BigEndian.Uint16(data[pos+2:]))
			if n < 2 || pos+2+n > len(data) {
				return 0, errors.New("jpeg: a segment runs past the end of the file")
			}
			return n, nil
		}
	)
	for {
		for pos < len(data) && data[pos] != 0xff {
			pos++ // image/jpeg skips stray bytes between segments too
		}
		for pos+1 < len(data) && data[pos+1] == 0xff {
			pos++ // fill bytes
		}
		if pos+1 >= len(data) {
			return Header{}, errors.New("jpeg: no frame header (SOF) before the end of the file")
		}
		marker := int(data[pos+1])
		switch {
		case marker == mSOI || marker >= mRST0 && marker <= mRST7 || marker == 0:
			pos += 2
			continue
		case marker == mEOI:
			return Header{}, errors.New("jpeg: no frame header (SOF) before EOI")
		}
		n, err := segmentLength()
		if err != nil {
			return Header{}, err
		}
		seg := data[pos+4 : pos+2+n]
		switch {
		case marker == mSOF0 || marker == mSOF1 || marker == mSOF2:
			if sawFrame {
				return Header{}, errors.New("jpeg: more than one frame header (SOF)")
			}
			sawFrame, progressive = true, marker == mSOF2
			if len(seg) < 6 || len(seg) != 6+3*int(seg[5]) || seg[5] != 1 && seg[5] != 3 && seg[5] != 4 {
				return Header{}, errors.New("jpeg: a frame header (SOF) of 1, 3 or 4 components is expected")
			}
			h, w = int(binary.BigEndian.Uint16(seg[1:])), int(binary.BigEndian.Uint16(seg[3:]))
			for i := 0; i < int(seg[5]); i++ {
				c := seg[6+3*i:]
				comps = append(comps, jpegComponent{id: int(c[0]), h: int(c[1] >> 4), v: int(c[1] & 0x0f)})
			}
			for _, c := range comps {
				if c.h < 1 || c.h > 4 || c.v < 1 || c.v > 4 {
					return Header{}, fmt.Errorf("jpeg: sampling factors %dx%d", c.h, c.v)
				}
			}
		case marker > mSOF2 && marker <= 0xcf && marker != mDHT && marker != 0xc8 && marker != 0xcc:
			return Header{}, fmt.Errorf("jpeg: unsupported coding process (SOF%d); baseline, extended and progressive Huffman JPEGs are read", marker-mSOF0)
		case marker == mAPP0 && bytes.HasPrefix(seg, []byte("JFIF\x00")):
			jfif = true
		case marker == mAPP14 && len(seg) >= 12 && bytes.HasPrefix(seg, []byte("Adobe")):
			adobe, adobeXform = true, seg[11]
		case marker == mSOS:
			if !sawFrame {
				return Header{}, errors.New("jpeg: scan (SOS) before the frame header (SOF)")
			}
			if w <= 0 || h <= 0 {
				return Header{}, fmt.Errorf("jpeg: non-positive dimension %dx%d", w, h)
			}
			rgb := len(comps) == 3 && !jfif && (adobe && adobeXform == 0 || comps[0].id == 'R' && comps[1].id == 'G' && comps[2].id == 'B')
			return jpegCost(w, h, comps, progressive, rgb), nil
		}
		pos += 2 + n
	}
}

// jpegCost is what image/jpeg allocates: the picture padded to whole MCUs (Gray, or YCbCr at the
// chroma subsampling of component 1), the K plane of a 4-component picture, each component's
// coefficients (64 int32 per block) when progressive, and the RGBA / CMYK copy an RGB or
// 4-component picture is converted into.
func jpegCost(w, h int, comps []jpegComponent, progressive, rgb bool) Header {
	hd := Header{Format: "jpeg", Width: w, Height: h}
	if len(comps) == 1 {
		comps = []jpegComponent{{h: 1, v: 1}} // image/jpeg codes a gray picture one block per MCU
	}
	h0, v0 := comps[0].h, comps[0].v
	mxx, myy := int64((w+8*h0-1)/(8*h0)), int64((h+8*v0-1)/(8*v0))
	pw, ph := 8*int64(h0)*mxx, 8*int64(v0)*myy // the padded picture
	var cost int64
	var parts []string
	if progressive {
		parts = append(parts, "progressive")
	} else {
		parts = append(parts, "baseline")
	}
	switch len(comps) {
	case 1:
		cost = pw * ph
		parts = append(parts, "gray")
	default:
		hr, vr := max(1, h0/comps[1].h), max(1, v0/comps[1].v)
		cw, ch := (pw+int64(hr)-1)/int64(hr), (ph+int64(vr)-1)/int64(vr)
		cost = pw*ph + 2*cw*ch
		parts = append(parts, subsampling(hr, vr))
		if len(comps) == 4 {
			cost += 64 * int64(comps[3].h*comps[3].v) * mxx * myy // the K plane
			cost += 4 * int64(w) * int64(h)                       // the CMYK picture
			parts = append(parts, "CMYK")
		} else if rgb {
			cost += 4 * int64(w) * int64(h) // converted into an RGBA picture
			parts = append(parts, "RGB")
		}
	}
	if progressive {
		for _, c := range comps {
			cost += 256 * mxx * myy * int64(c.h*c.v)
		}
	}
	hd.DecodeBytes = cost
	hd.Layout = strings.Join(parts, " ")
	return hd
}

// subsampling names a chroma subsampling by its horizontal and vertical ratios.
func subsampling(hr, vr int) string {
	switch hr<<4 | vr {
	case 0x11:
		return "4:4:4"
	case 0x12:
		return "4:4:0"
	case 0x21:
		return "4:2:2"
	case 0x22:
		return "4:2:0"
	case 0x41:
		return "4:1:1"
	case 0x42:
		return "4:1:0"
	}
	return fmt.Sprintf("subsampled %dx%d", hr, vr)
}
