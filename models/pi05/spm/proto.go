package spm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// The subset of sentencepiece_model.proto (ModelProto) that encoding needs. Field numbers are the
// upstream ones; every other field is skipped by wire type, so newer model files still load.

// PieceType is ModelProto.SentencePiece.Type.
type PieceType int

// Piece types as numbered in sentencepiece_model.proto.
const (
	Normal      PieceType = 1
	Unknown     PieceType = 2
	Control     PieceType = 3
	UserDefined PieceType = 4
	Unused      PieceType = 5
	Byte        PieceType = 6
)

// ModelType is TrainerSpec.ModelType.
type ModelType int

// Model types as numbered in sentencepiece_model.proto.
const (
	Unigram ModelType = 1
	BPE     ModelType = 2
	Word    ModelType = 3
	Char    ModelType = 4
)

type piece struct {
	text  string
	score float32
	typ   PieceType
}

type trainerSpec struct {
	modelType               ModelType
	byteFallback            bool
	treatWhitespaceAsSuffix bool
	unkPiece, bosPiece      string
	eosPiece, padPiece      string
}

type normalizerSpec struct {
	name                   string
	charsmap               []byte
	addDummyPrefix         bool
	removeExtraWhitespaces bool
	escapeWhitespaces      bool
}

type modelProto struct {
	pieces     []piece
	trainer    trainerSpec
	normalizer normalizerSpec
}

// wireReader walks one protobuf message.
type wireReader struct {
	buf []byte
	pos int
}

var errTruncated = errors.New("truncated protobuf")

func (r *wireReader) done() bool { return r.pos >= len(r.buf) }

func (r *wireReader) varint() (uint64, error) {
	v, n := binary.Uvarint(r.buf[r.pos:])
	if n <= 0 {
		return 0, fmt.Errorf("bad varint at byte %d: %w", r.pos, errTruncated)
	}
	r.pos += n
	return v, nil
}

// next returns the field number and wire type of the next field.
func (r *wireReader) next() (field int, wire int, err error) {
	key, err := r.varint()
	if err != nil {
		return 0, 0, err
	}
	return int(key >> 3), int(key & 7), nil
}

func (r *wireReader) bytes() ([]byte, error) {
	n, err := r.varint()
	if err != nil {
		return nil, err
	}
	if n > uint64(len(r.buf)-r.pos) {
		return nil, fmt.Errorf("length %d at byte %d: %w", n, r.pos, errTruncated)
	}
	b := r.buf[r.pos : r.pos+int(n)]
	r.pos += int(n)
	return b, nil
}

func (r *wireReader) fixed32() (uint32, error) {
	if len(r.buf)-r.pos < 4 {
		return 0, errTruncated
	}
	v := binary.LittleEndian.Uint32(r.buf[r.pos:])
	r.pos += 4
	return v, nil
}

func (r *wireReader) skip(wire int) error {
	switch wire {
	case 0:
		_, err := r.varint()
		return err
	case 1:
		if len(r.buf)-r.pos < 8 {
			return errTruncated
		}
		r.pos += 8
		return nil
	case 2:
		_, err := r.bytes()
		return err
	case 5:
		_, err := r.fixed32()
		return err
	default:
		return fmt.Errorf("unsupported wire type %d at byte %d", wire, r.pos)
	}
}

// decodeFields calls fn for every field of msg; fn reports whether it consumed the value.
func decodeFields(msg []byte, fn func(r *wireReader, field, wire int) (bool, error)) error {
	r := &wireReader{buf: msg}
	for !r.done() {
		field, wire, err := r.next()
		if err != nil {
			return err
		}
		used, err := fn(r, field, wire)
		if err != nil {
			return fmt.Errorf("field %d: %w", field, err)
		}
		if !used {
			if err := r.skip(wire); err != nil {
				return fmt.Errorf("field %d: %w", field, err)
			}
		}
	}
	return nil
}

func wantWire(got, want int) error {
	if got != want {
		return fmt.Errorf("wire type %d, want %d", got, want)
	}
	return nil
}

func readString(r *wireReader, wire int) (string, error) {
	if err := wantWire(wire, 2); err != nil {
		return "", err
	}
	b, err := r.bytes()
	return string(b), err
}

func readVarint(r *wireReader, wire int) (uint64, error) {
	if err := wantWire(wire, 0); err != nil {
		return 0, err
	}
	return r.varint()
}

func parseModelProto(buf []byte) (*modelProto, error) {
	m := &modelProto{
		trainer: trainerSpec{
			modelType: Unigram,
			unkPiece:  "<unk>", bosPiece: "<s>", eosPiece: "</s>", padPiece: "<pad>",
		},
		normalizer: normalizerSpec{addDummyPrefix: true, removeExtraWhitespaces: true, escapeWhitespaces: true},
	}
	err := decodeFields(buf, func(r *wireReader, field, wire int) (bool, error) {
		switch field {
		case 1:
			if err := wantWire(wire, 2); err != nil {
				return false, err
			}
			b, err := r.bytes()
			if err != nil {
				return false, err
			}
			p, err := parsePiece(b)
			if err != nil {
				return false, fmt.Errorf("piece %d: %w", len(m.pieces), err)
			}
			m.pieces = append(m.pieces, p)
			return true, nil
		case 2:
			if err := wantWire(wire, 2); err != nil {
				return false, err
			}
			b, err := r.bytes()
			if err != nil {
				return false, err
			}
			return true, parseTrainerSpec(b, &m.trainer)
		case 3:
			if err := wantWire(wire, 2); err != nil {
				return false, err
			}
			b, err := r.bytes()
			if err != nil {
				return false, err
			}
			return true, parseNormalizerSpec(b, &m.normalizer)
		}
		return false, nil
	})
	return m, err
}

func parsePiece(b []byte) (piece, error) {
	p := piece{typ: Normal}
	err := decodeFields(b, func(r *wireReader, field, wire int) (bool, error) {
		var err error
		switch field {
		case 1:
			p.text, err = readString(r, wire)
			return true, err
		case 2:
			if err := wantWire(wire, 5); err != nil {
				return false, err
			}
			v, err := r.fixed32()
			p.score = math.Float32frombits(v)
			return true, err
		case 3:
			v, err := readVarint(r, wire)
			p.typ = PieceType(v)
			return true, err
		}
		return false, nil
	})
	return p, err
}

// parseTrainerSpec decodes a TrainerSpec message.
func parseTrainerSpec(b []byte, t *trainerSpec) error {
	return decodeFields(b, func(r *wireReader, field, wire int) (bool, error) {
		var err error
		var v uint64
		switch field {
		case 3:
			v, err = readVarint(r, wire)
			t.modelType = ModelType(v)
		case 24:
			v, err = readVarint(r, wire)
			t.treatWhitespaceAsSuffix = v != 0
		case 35:
			v, err = readVarint(r, wire)
			t.byteFallback = v != 0
		case 45:
			t.unkPiece, err = readString(r, wire)
		case 46:
			t.bosPiece, err = readString(r, wire)
		case 47:
			t.eosPiece, err = readString(r, wire)
		case 48:
			t.padPiece, err = readString(r, wire)
		default:
			return false, nil
		}
		return true, err
	})
}

// parseNormalizerSpec decodes a NormalizerSpec message.
func parseNormalizerSpec(b []byte, n *normalizerSpec) error {
	return decodeFields(b, func(r *wireReader, field, wire int) (bool, error) {
		var err error
		var v uint64
		switch field {
		case 1:
			n.name, err = readString(r, wire)
		case 2:
			var s string
			s, err = readString(r, wire)
			n.charsmap = []byte(s)
		case 3:
			v, err = readVarint(r, wire)
			n.addDummyPrefix = v != 0
		case 4:
			v, err = readVarint(r, wire)
			n.removeExtraWhitespaces = v != 0
		case 5:
			v, err = readVarint(r, wire)
			n.escapeWhitespaces = v != 0
		default:
			return false, nil
		}
		return true, err
	})
}
