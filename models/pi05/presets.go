package pi05

import (
	"fmt"
	"slices"
)

// Prompt buckets of the original pi0.5 package: 32/64/128/224 for every camera count, plus 192 for one
// camera, 160 for two and 96 for four. A request runs in the smallest that holds its real tokens.
var basePromptBuckets = []int{32, 64, 128, 224}

var extraPromptBucket = map[int]int{1: 192, 2: 160, 4: 96}

// PromptBuckets lists the prompt buckets for a camera count, ascending.
func PromptBuckets(cameras int) []int {
	b := slices.Clone(basePromptBuckets)
	if extra, ok := extraPromptBucket[cameras]; ok {
		b = append(b, extra)
		slices.Sort(b)
	}
	return b
}

// SelectPromptBucket returns the bucket for a request with realTokens tokens. requested > 0 names a
// bucket (the request's prompt_bucket), which must exist and hold the tokens.
func SelectPromptBucket(cameras, realTokens, requested int) (int, error) {
	buckets := PromptBuckets(cameras)
	if requested > 0 {
		if !slices.Contains(buckets, requested) {
			return 0, fmt.Errorf("prompt_bucket %d is not one of %v for %d cameras", requested, buckets, cameras)
		}
		if realTokens > requested {
			return 0, fmt.Errorf("prompt_bucket %d cannot hold the %d prompt tokens", requested, realTokens)
		}
		return requested, nil
	}
	for _, b := range buckets {
		if realTokens <= b {
			return b, nil
		}
	}
	return 0, fmt.Errorf("%d prompt tokens exceed the largest bucket %d", realTokens, buckets[len(buckets)-1])
}

// ActionRows is the action-row bucket of a horizon: 32 rows for H <= 32, else 64.
func ActionRows(horizon int) int {
	if horizon <= 32 {
		return 32
	}
	return 64
}
