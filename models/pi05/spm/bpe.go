package spm

import "container/heap"

// encodedPiece is one segment of the normalized text and its id (unk id when not in the vocab).
type encodedPiece struct {
	text string
	id   int
}

// bpeSymbol is a span of the normalized text in a doubly linked list of symbols.
type bpeSymbol struct {
	prev, next int
	frozen     bool // user-defined symbols are never merged
	start, end int  // byte span; end == start once merged away
}

type bpePair struct {
	left, right int
	score       float32
	size        int
}

// bpeAgenda pops the highest score first, then the leftmost pair.
type bpeAgenda []bpePair

func (a bpeAgenda) Len() int { return len(a) }
func (a bpeAgenda) Less(i, j int) bool {
	if a[i].score != a[j].score {
		return a[i].score > a[j].score
	}
	return a[i].left < a[j].left
}
func (a bpeAgenda) Swap(i, j int) { a[i], a[j] = a[j], a[i] }
func (a *bpeAgenda) Push(x any)   { *a = append(*a, x.(bpePair)) }
func (a *bpeAgenda) Pop() any {
	old := *a
	x := old[len(old)-1]
	*a = old[:len(old)-1]
	return x
}

// encodeBPE merges adjacent symbols by piece score, as SentencePiece's bpe::Model::Encode, and
// splits merged UNUSED pieces back into the pieces they were merged from.
func (p *Processor) encodeBPE(text string) []encodedPiece {
	if text == "" {
		return nil
	}
	var syms []bpeSymbol
	for pos := 0; pos < len(text); {
		l := p.user.match(text[pos:])
		frozen := l > 0
		if !frozen {
			l = min(oneCharLen(text[pos]), len(text)-pos)
		}
		syms = append(syms, bpeSymbol{prev: len(syms) - 1, next: len(syms) + 1, frozen: frozen, start: pos, end: pos + l})
		pos += l
	}
	syms[len(syms)-1].next = -1

	agenda := &bpeAgenda{}
	revMerge := map[string][2]string{}
	tryPair := func(left, right int) {
		if left < 0 || right < 0 || syms[left].frozen || syms[right].frozen {
			return
		}
		merged := text[syms[left].start:syms[right].end]
		id, ok := p.pieces[merged]
		if !ok {
			return
		}
		heap.Push(agenda, bpePair{left: left, right: right, score: p.model.pieces[id].score, size: len(merged)})
		if p.model.pieces[id].typ == Unused {
			revMerge[merged] = [2]string{text[syms[left].start:syms[left].end], text[syms[right].start:syms[right].end]}
		}
	}
	for i := 1; i < len(syms); i++ {
		tryPair(i-1, i)
	}
	for agenda.Len() > 0 {
		top := heap.Pop(agenda).(bpePair)
		l, r := &syms[top.left], &syms[top.right]
		// Stale entries: either side was merged away or has grown since the pair was queued.
		if l.start == l.end || r.start == r.end || (l.end-l.start)+(r.end-r.start) != top.size {
			continue
		}
		l.end = r.end
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = top.left
		}
		r.end = r.start
		tryPair(l.prev, top.left)
		tryPair(top.left, l.next)
	}

	var out []encodedPiece
	var resegment func(w string)
	resegment = func(w string) {
		id := p.pieceToID(w)
		if id < 0 || p.model.pieces[id].typ != Unused {
			out = append(out, encodedPiece{w, id})
			return
		}
		parts, ok := revMerge[w]
		if !ok {
			out = append(out, encodedPiece{w, id})
			return
		}
		resegment(parts[0])
		resegment(parts[1])
	}
	for i := 0; i >= 0; i = syms[i].next {
		resegment(text[syms[i].start:syms[i].end])
	}
	return out
}
