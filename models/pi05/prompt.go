package pi05

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// TextEncoder is what prompt building needs from a SentencePiece model (spm.Processor).
type TextEncoder interface {
	Encode(text string) []int
	BOS() int
	Size() int
}

// isPySpace is Python's str.isspace for one rune: Unicode White_Space plus U+001C..U+001F.
func isPySpace(r rune) bool { return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f) }

// CleanPrompt is `prompt.strip().replace("_", " ").replace("\n", " ")` (no lowercasing).
func CleanPrompt(s string) string {
	s = strings.TrimFunc(s, isPySpace)
	return strings.NewReplacer("_", " ", "\n", " ").Replace(s)
}

// DiscretizeState pads state with zeros to dim values and maps each to one of 256 bins:
// np.digitize(s, linspace(-1, 1, 257)[:-1]) - 1, i.e. floor((s+1)*128) capped at 255, and -1 below
// -1 (no clipping). lerobot pads the state to max_state_dim before discretizing, so a 7-value
// state still yields dim numbers. The bin edges i/128-1 are exact in float64, so this is exact.
func DiscretizeState(state []float32, dim int) []int {
	out := make([]int, max(dim, len(state)))
	for i := range out {
		var s float64
		if i < len(state) {
			s = float64(state[i])
		}
		switch {
		case s < -1:
			out[i] = -1
		default:
			out[i] = min(int(math.Floor((s+1)*128)), 255)
		}
	}
	return out
}

// CutTask keeps the start of a task that can reach a prompt of tokenLen tokens, so that a long
// one costs no more to tokenize than a short one: tokenLen pieces cover at most tokenLen*pieceBytes
// bytes of the normalized text, which does not shrink ASCII; twice that leaves room for the merges
// around the cut, which can only change tokens past the ones kept. Leading white space, which
// CleanPrompt strips, is not counted.
func CutTask(task string, tokenLen, pieceBytes int) string {
	task = strings.TrimLeftFunc(task, isPySpace)
	limit := 2 * tokenLen * pieceBytes
	if len(task) <= limit {
		return task
	}
	for limit > 0 && !utf8.RuneStart(task[limit]) {
		limit--
	}
	return task[:limit]
}

// PromptText is lerobot's/openpi's pi0.5 prompt: f"Task: {text}, State: {' '.join(d)};\nAction: ".
func PromptText(task string, bins []int) string {
	var b strings.Builder
	b.WriteString("Task: ")
	b.WriteString(CleanPrompt(task))
	b.WriteString(", State: ")
	for i, d := range bins {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.Itoa(d))
	}
	b.WriteString(";\nAction: ")
	return b.String()
}

// Prompt is a request's language input after tokenization.
type Prompt struct {
	Text      string  // the full prompt string ("" when the request sent tokens)
	Tokens    []int32 // the real tokens, BOS first, at most the token buffer long
	Truncated bool    // the prompt had more tokens than the buffer and was cut
	Original  int     // token count before truncation
}

// EncodePrompt tokenizes text with BOS and no EOS and truncates it to tokenLen tokens.
func EncodePrompt(enc TextEncoder, text string, tokenLen int) (Prompt, error) {
	ids := enc.Encode(text)
	bos := enc.BOS()
	if bos < 0 {
		return Prompt{}, fmt.Errorf("tokenizer has no BOS piece")
	}
	all := make([]int, 0, len(ids)+1)
	all = append(all, bos)
	all = append(all, ids...)
	p, err := promptFromIDs(all, enc.Size(), tokenLen)
	p.Text = text
	return p, err
}

// TokensPrompt takes pre-tokenized ids (the request's tokens) as they are: the caller includes BOS.
func TokensPrompt(ids []int, vocab, tokenLen int) (Prompt, error) {
	if len(ids) == 0 {
		return Prompt{}, fmt.Errorf("tokens is empty")
	}
	return promptFromIDs(ids, vocab, tokenLen)
}

func promptFromIDs(ids []int, vocab, tokenLen int) (Prompt, error) {
	p := Prompt{Original: len(ids)}
	if len(ids) > tokenLen {
		ids = ids[:tokenLen]
		p.Truncated = true
	}
	p.Tokens = make([]int32, len(ids))
	for i, id := range ids {
		if id < 0 || id >= vocab {
			return Prompt{}, fmt.Errorf("token %d at index %d is outside the vocabulary [0, %d)", id, i, vocab)
		}
		p.Tokens[i] = int32(id)
	}
	return p, nil
}

// Padded returns the tokens right-padded with 0 to bucket and the mask (true on real tokens).
func (p Prompt) Padded(bucket int) ([]int32, []bool) {
	ids := make([]int32, bucket)
	mask := make([]bool, bucket)
	copy(ids, p.Tokens)
	for i := range min(len(p.Tokens), bucket) {
		mask[i] = true
	}
	return ids, mask
}
