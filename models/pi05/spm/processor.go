// Package spm is a pure-Go SentencePiece encoder. It reads a tokenizer.model file (the protobuf
// ModelProto) and returns the same ids as the reference C++ library for BPE models (with or
// without byte fallback, PaliGemma's kind) and unigram models. Training, sampling and decoding
// are not implemented: a model server only needs deterministic encoding.
package spm

import (
	"fmt"
	"math"
	"os"
)

// Processor encodes text with one SentencePiece model. It is immutable and safe for concurrent use.
type Processor struct {
	model       *modelProto
	pieces      map[string]int // NORMAL, USER_DEFINED and UNUSED pieces
	reserved    map[string]int // CONTROL, UNKNOWN and BYTE pieces
	unkID       int
	byteIDs     [256]int
	minScore    float32 // over NORMAL pieces, for the unigram unknown penalty
	maxScore    float32 // over NORMAL pieces, for the unigram user-defined bonus
	maxPieceLen int     // bytes, over pieces
	user        *prefixMatcher
	norm        *normalizer
}

// Load reads a tokenizer.model file.
func Load(path string) (*Processor, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read sentencepiece model: %w", err)
	}
	p, err := New(data)
	if err != nil {
		return nil, fmt.Errorf("sentencepiece model %s: %w", path, err)
	}
	return p, nil
}

// New parses a serialized ModelProto.
func New(data []byte) (*Processor, error) {
	m, err := parseModelProto(data)
	if err != nil {
		return nil, fmt.Errorf("parse ModelProto: %w", err)
	}
	if m.trainer.modelType != BPE && m.trainer.modelType != Unigram {
		return nil, fmt.Errorf("model type %d is not supported (only BPE and unigram)", m.trainer.modelType)
	}
	if len(m.pieces) == 0 {
		return nil, fmt.Errorf("model has no pieces")
	}
	p := &Processor{
		model:    m,
		pieces:   make(map[string]int, len(m.pieces)),
		reserved: map[string]int{},
		unkID:    -1,
		minScore: math.MaxFloat32,
		maxScore: math.SmallestNonzeroFloat32 * (1 << 23), // FLT_MIN, the smallest normal float32
	}
	var userSymbols []string
	for i, pc := range m.pieces {
		if pc.text == "" {
			return nil, fmt.Errorf("piece %d is empty", i)
		}
		target := p.reserved
		switch pc.typ {
		case Normal, UserDefined, Unused:
			target = p.pieces
		case Unknown, Control, Byte:
		default:
			return nil, fmt.Errorf("piece %d %q has unknown type %d", i, pc.text, pc.typ)
		}
		if _, dup := target[pc.text]; dup {
			return nil, fmt.Errorf("piece %d %q is already defined", i, pc.text)
		}
		target[pc.text] = i
		p.maxPieceLen = max(p.maxPieceLen, len(pc.text))
		switch pc.typ {
		case UserDefined:
			userSymbols = append(userSymbols, pc.text)
		case Unknown:
			if p.unkID >= 0 {
				return nil, fmt.Errorf("piece %d %q: unknown piece is already defined as %d", i, pc.text, p.unkID)
			}
			p.unkID = i
		case Byte:
			if !m.trainer.byteFallback {
				return nil, fmt.Errorf("piece %d %q is a byte piece but byte_fallback is off", i, pc.text)
			}
		case Normal:
			p.minScore = min(p.minScore, pc.score)
			p.maxScore = max(p.maxScore, pc.score)
		}
	}
	if p.unkID < 0 {
		return nil, fmt.Errorf("model has no unknown piece")
	}
	for b := range p.byteIDs {
		p.byteIDs[b] = p.pieceToID(fmt.Sprintf("<0x%02X>", b))
	}
	p.user = newPrefixMatcher(userSymbols)
	p.norm, err = newNormalizer(m.normalizer, m.trainer.treatWhitespaceAsSuffix, p.user)
	if err != nil {
		return nil, fmt.Errorf("normalizer %q: %w", m.normalizer.name, err)
	}
	return p, nil
}

// pieceToID looks a piece up as SentencePiece does: reserved pieces first, then the vocabulary,
// else the unknown id.
func (p *Processor) pieceToID(s string) int {
	if id, ok := p.reserved[s]; ok {
		return id
	}
	if id, ok := p.pieces[s]; ok {
		return id
	}
	return p.unkID
}

// MaxPieceBytes is the longest piece in bytes: no id covers more of the normalized text, save the
// one unknown id a run of unknown characters becomes without byte fallback.
func (p *Processor) MaxPieceBytes() int { return p.maxPieceLen }

// Size is the number of pieces (the vocabulary size).
func (p *Processor) Size() int { return len(p.model.pieces) }

// IDToPiece returns the text of piece id, or "" when out of range.
func (p *Processor) IDToPiece(id int) string {
	if id < 0 || id >= len(p.model.pieces) {
		return ""
	}
	return p.model.pieces[id].text
}

// controlID returns the id of piece s when it is a control piece, else -1 (SentencePiece's bos_id etc.).
func (p *Processor) controlID(s string) int {
	id := p.pieceToID(s)
	if p.model.pieces[id].typ == Control {
		return id
	}
	return -1
}

// BOS is the beginning-of-sentence id, or -1 when the model has none.
func (p *Processor) BOS() int { return p.controlID(p.model.trainer.bosPiece) }

// EOS is the end-of-sentence id, or -1 when the model has none.
func (p *Processor) EOS() int { return p.controlID(p.model.trainer.eosPiece) }

// Pad is the padding id, or -1 when the model has none.
func (p *Processor) Pad() int { return p.controlID(p.model.trainer.padPiece) }

// Unk is the unknown-piece id.
func (p *Processor) Unk() int { return p.unkID }

// Encode returns the ids of text without BOS or EOS, identical to SentencePieceProcessor::Encode.
func (p *Processor) Encode(text string) []int {
	normalized := p.norm.normalize(text)
	var segs []encodedPiece
	if p.model.trainer.modelType == BPE {
		segs = p.encodeBPE(normalized)
	} else {
		segs = p.encodeUnigram(normalized)
	}
	ids := make([]int, 0, len(segs))
	prevUnk := false
	for _, s := range segs {
		isUnk := s.id == p.unkID
		switch {
		case s.id >= 0 && p.model.pieces[s.id].typ == Control:
			ids = append(ids, s.id)
		case isUnk && p.model.trainer.byteFallback:
			for i := 0; i < len(s.text); i++ {
				ids = append(ids, p.byteIDs[s.text[i]])
			}
		case isUnk && prevUnk:
			// A run of unknown pieces becomes one unknown id.
		default:
			ids = append(ids, s.id)
		}
		prevUnk = isUnk
	}
	return ids
}
