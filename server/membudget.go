package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The memory budget bounds what requests that have arrived but not been answered hold: each
// request's body, from before it is read (its declared length, or as it arrives: body.go), and the
// pictures it decodes (reserved from their headers before a pixel is decoded). A request that does
// not fit while others hold the budget gets a 503 with Retry-After instead of growing the process;
// one that could never fit gets a 413. The budget does not cover the models' own working memory
// (the RF-DETR resize intermediate, the devices' scratch).

// RequestMemoryEnv sets the budget in MiB; 0 turns it off.
const RequestMemoryEnv = "TT_REQUEST_MEMORY_MB"

// DefaultRequestMemory is the budget when RequestMemoryEnv is unset: room for the largest RF-DETR
// request (a 32 MiB body and a picture of imagemem.MaxDecodeBytes) and then some.
const DefaultRequestMemory = 256 << 20

// memoryRetryAfter is the Retry-After of a 503 for a full budget: a forward or two.
const memoryRetryAfter = time.Second

// RequestMemoryFromEnv reads RequestMemoryEnv: MiB, 0 (no budget) to 1048576; unset is the default.
func RequestMemoryFromEnv(getenv func(string) string) (int64, error) {
	v := strings.TrimSpace(getenv(RequestMemoryEnv))
	if v == "" {
		return DefaultRequestMemory, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > 1<<20 {
		return 0, fmt.Errorf("%s=%q: want MiB from 0 (no budget) to 1048576", RequestMemoryEnv, v)
	}
	return n << 20, nil
}

// memBudget is the bytes requests may hold; limit 0 means no budget. Safe for concurrent use.
type memBudget struct {
	limit int64

	mu   sync.Mutex
	used int64
}

// take reserves n bytes, or says why not.
func (b *memBudget) take(n int64) error {
	if b.limit == 0 || n <= 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.limit {
		return &memoryError{need: n, used: b.used, limit: b.limit}
	}
	b.used += n
	return nil
}

func (b *memBudget) give(n int64) {
	if b.limit == 0 || n <= 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
}

// inUse is what requests hold now.
func (b *memBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

type memBudgetKey struct{}

// Reservation is one request's share of the budget: what it reserved and not yet gave back. It
// implements imagemem.Budget for the decoders. A nil reservation (no budget: tests that call the
// decoders directly) takes everything. Not safe for concurrent use: one request, one goroutine at
// a time.
type Reservation struct {
	b    *memBudget
	held int64
}

// RequestMemory is a request's share of the server's budget, holding nothing yet (nil outside a
// server: no budget). The handler defers Done, so that whatever happens, a panic too, the request
// gives back all it took.
func RequestMemory(ctx context.Context) *Reservation {
	b, _ := ctx.Value(memBudgetKey{}).(*memBudget)
	if b == nil {
		return nil
	}
	return &Reservation{b: b}
}

// Reserve takes n more bytes for the request.
func (r *Reservation) Reserve(n int64) error {
	if r == nil {
		return nil
	}
	if err := r.b.take(n); err != nil {
		me := err.(*memoryError)
		me.held = r.held
		return me
	}
	r.held += n
	return nil
}

// Release gives back n bytes the request no longer holds.
func (r *Reservation) Release(n int64) {
	if r == nil {
		return
	}
	n = min(n, r.held)
	r.held -= n
	r.b.give(n)
}

// Done gives back everything: the request is answered.
func (r *Reservation) Done() {
	if r != nil {
		r.Release(r.held)
	}
}

// memoryError is a reservation the budget cannot take.
type memoryError struct {
	need, held, used, limit int64
}

// never reports a request that cannot fit even in an empty budget.
func (e *memoryError) never() bool { return e.held+e.need > e.limit }

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

func (e *memoryError) Error() string {
	if e.never() {
		return fmt.Sprintf("this request needs %s (its body and decoded images), more than the server's whole request memory budget of %s (%s)",
			mib(e.held+e.need), mib(e.limit), RequestMemoryEnv)
	}
	return fmt.Sprintf("request memory budget full: this request needs %s more and requests waiting for the model hold %s of %s (%s); retry after %s",
		mib(e.need), mib(e.used), mib(e.limit), RequestMemoryEnv, memoryRetryAfter)
}

// MemoryAPIError answers a memoryError (wrapped or not): 413 when the request can never fit, else
// 503 with Retry-After. Other errors give nil.
func MemoryAPIError(err error) *APIError {
	var me *memoryError
	if !errors.As(err, &me) {
		return nil
	}
	if me.never() {
		return &APIError{Status: http.StatusRequestEntityTooLarge, Detail: me.Error()}
	}
	return &APIError{Status: http.StatusServiceUnavailable, Detail: me.Error(), RetryAfter: memoryRetryAfter}
}
