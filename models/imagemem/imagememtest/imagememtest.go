// Package imagememtest writes the pictures memory tests send: small files that declare large
// pictures and that image/png and image/jpeg decode completely (every pixel written), so a decoder
// that accepts one really fills the memory its header asks for.
package imagememtest

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"hash/crc32"
)

// JPEG describes a JPEG whose 8×8 blocks are all flat mid-gray: every DC difference and every AC
// coefficient is zero, so each block costs one or two bits and a 8192×8192 picture is a few
// hundred kilobytes.
type JPEG struct {
	Width, Height int
	Gray          bool // one component; else three (YCbCr)
	Subsample420  bool // three components: luma 2×2, chroma 1×1; else 4:4:4
	RGB           bool // three components named R, G, B: image/jpeg converts them into an RGBA copy
	CMYK          bool // four components (an Adobe APP14 marker says CMYK)
	// Progressive writes one DC scan (SOF2): image/jpeg keeps 64 coefficients per block of every
	// component for it, and reconstructs the whole picture at the end. Else baseline (SOF0).
	Progressive bool
}

// Encode writes the file.
func (j JPEG) Encode() []byte {
	var out bytes.Buffer
	out.Write([]byte{0xff, 0xd8}) // SOI
	segment := func(marker byte, payload []byte) {
		out.Write([]byte{0xff, marker})
		_ = binary.Write(&out, binary.BigEndian, uint16(2+len(payload)))
		out.Write(payload)
	}
	dqt := make([]byte, 65) // table 0, 8-bit, every step 1
	for i := 1; i < len(dqt); i++ {
		dqt[i] = 1
	}
	segment(0xdb, dqt)
	if j.CMYK {
		segment(0xee, []byte("Adobe\x00\x64\x00\x00\x00\x00\x00")) // transform 0: CMYK, not YCCK
	}

	type comp struct{ id, h, v byte }
	var comps []comp
	switch {
	case j.Gray:
		comps = []comp{{1, 1, 1}}
	case j.CMYK:
		comps = []comp{{1, 1, 1}, {2, 1, 1}, {3, 1, 1}, {4, 1, 1}}
	case j.RGB:
		comps = []comp{{'R', 1, 1}, {'G', 1, 1}, {'B', 1, 1}}
	default:
		comps = []comp{{1, 1, 1}, {2, 1, 1}, {3, 1, 1}}
		if j.Subsample420 {
			comps[0].h, comps[0].v = 2, 2
		}
	}
	sof := []byte{8, byte(j.Height >> 8), byte(j.Height), byte(j.Width >> 8), byte(j.Width), byte(len(comps))}
	for _, c := range comps {
		sof = append(sof, c.id, c.h<<4|c.v, 0)
	}
	marker := byte(0xc0)
	if j.Progressive {
		marker = 0xc2
	}
	segment(marker, sof)
	// One code of one bit per table: "0" is DC category 0 (no difference) and AC symbol 0x00 (EOB).
	oneCode := func(class byte) []byte {
		t := make([]byte, 1+16+1)
		t[0], t[1] = class<<4, 1
		return t
	}
	segment(0xc4, append(oneCode(0), oneCode(1)...))

	sos := []byte{byte(len(comps))}
	for _, c := range comps {
		sos = append(sos, c.id, 0x00)
	}
	bitsPerBlock := 2 // DC category 0, then EOB
	if j.Progressive {
		sos = append(sos, 0, 0, 0) // the DC scan: Ss = Se = 0, Ah = Al = 0
		bitsPerBlock = 1
	} else {
		sos = append(sos, 0, 63, 0)
	}
	segment(0xda, sos)
	h0, v0 := int(comps[0].h), int(comps[0].v)
	mcus := ((j.Width + 8*h0 - 1) / (8 * h0)) * ((j.Height + 8*v0 - 1) / (8 * v0))
	blocksPerMCU := 0
	for _, c := range comps {
		blocksPerMCU += int(c.h) * int(c.v)
	}
	bits := mcus * blocksPerMCU * bitsPerBlock
	out.Write(make([]byte, bits/8))
	if r := bits % 8; r != 0 {
		out.WriteByte(0xff >> r) // the last codes, then 1-bits of padding
	}
	out.Write([]byte{0xff, 0xd9}) // EOI
	return out.Bytes()
}

// PNG describes a PNG whose samples are all zero.
type PNG struct {
	Width, Height int
	Depth         int // bits per sample
	ColorType     int // 0 gray, 2 RGB, 3 paletted, 4 gray+alpha, 6 RGBA
	Interlaced    bool
	Transparent   bool // a tRNS chunk (gray, RGB): image/png then decodes into NRGBA or NRGBA64
}

// Encode writes the file, rows unfiltered, compressed for speed: 8192×8192 16-bit RGBA takes
// about 650 KB and a second or two.
func (p PNG) Encode() []byte {
	channels := map[int]int{0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[p.ColorType]
	var z bytes.Buffer
	zw, _ := zlib.NewWriterLevel(&z, zlib.BestSpeed)
	writeRows := func(w, h int) {
		if w == 0 || h == 0 {
			return // an empty Adam7 pass has no rows, not even filter bytes
		}
		row := make([]byte, 1+(w*channels*p.Depth+7)/8)
		for y := 0; y < h; y++ {
			_, _ = zw.Write(row)
		}
	}
	if p.Interlaced {
		// Adam7: the passes' origins and steps (PNG spec 8.2).
		for _, s := range [7][4]int{{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4}, {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}} {
			writeRows((p.Width-s[0]+s[2]-1)/s[2], (p.Height-s[1]+s[3]-1)/s[3])
		}
	} else {
		writeRows(p.Width, p.Height)
	}
	_ = zw.Close()

	var out bytes.Buffer
	out.WriteString("\x89PNG\r\n\x1a\n")
	chunk := func(typ string, data []byte) {
		_ = binary.Write(&out, binary.BigEndian, uint32(len(data)))
		out.WriteString(typ)
		out.Write(data)
		_ = binary.Write(&out, binary.BigEndian, crc32.ChecksumIEEE(append([]byte(typ), data...)))
	}
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], uint32(p.Width))
	binary.BigEndian.PutUint32(ihdr[4:], uint32(p.Height))
	ihdr[8], ihdr[9] = byte(p.Depth), byte(p.ColorType)
	if p.Interlaced {
		ihdr[12] = 1
	}
	chunk("IHDR", ihdr)
	if p.ColorType == 3 {
		chunk("PLTE", []byte{0, 0, 0})
	}
	if p.Transparent {
		chunk("tRNS", make([]byte, map[int]int{0: 2, 2: 6, 3: 1}[p.ColorType]))
	}
	chunk("IDAT", z.Bytes())
	chunk("IEND", nil)
	return out.Bytes()
}
