package spm

// unkPenalty is subtracted from the lowest piece score to price an unknown character.
const unkPenalty = 10.0

type bestPath struct {
	id       int
	score    float32
	startsAt int
}

// encodeUnigram finds the best-scoring segmentation (Viterbi over all vocabulary pieces), as
// SentencePiece's unigram::Model::EncodeOptimized, including its float/double arithmetic.
func (p *Processor) encodeUnigram(text string) []encodedPiece {
	if text == "" {
		return nil
	}
	size := len(text)
	unkScore := p.minScore - float32(unkPenalty)
	best := make([]bestPath, size+1)
	for i := range best {
		best[i].startsAt = -1
	}
	for start := 0; start < size; {
		till := best[start].score
		mblen := min(oneCharLen(text[start]), size-start)
		hasSingle := false
		for end := start + 1; end <= min(size, start+p.maxPieceLen); end++ {
			id, ok := p.pieces[text[start:end]]
			if !ok || p.model.pieces[id].typ == Unused {
				continue
			}
			length := end - start
			var score float64
			if p.model.pieces[id].typ == UserDefined {
				// User-defined symbols get a bonus so that they are always chosen.
				score = float64(float32(length)*p.maxScore) - 0.1
			} else {
				score = float64(p.model.pieces[id].score)
			}
			cand := score + float64(till)
			if t := &best[end]; t.startsAt == -1 || cand > float64(t.score) {
				t.score, t.startsAt, t.id = float32(cand), start, id
			}
			if length == mblen {
				hasSingle = true
			}
		}
		if !hasSingle {
			cand := unkScore + till
			if t := &best[start+mblen]; t.startsAt == -1 || cand > t.score {
				t.score, t.startsAt, t.id = cand, start, p.unkID
			}
		}
		start += mblen
	}
	var rev []encodedPiece
	for end := size; end > 0; end = best[end].startsAt {
		n := best[end]
		rev = append(rev, encodedPiece{text[n.startsAt:end], n.id})
	}
	out := make([]encodedPiece, len(rev))
	for i, e := range rev {
		out[len(rev)-1-i] = e
	}
	return out
}
