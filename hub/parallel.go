package hub

import (
	"context"
	"errors"
	"sync"
)

// parallel runs fn on every item, at most n at once. The first failure
// cancels the rest; failures that are only that cancellation are not
// reported. It returns every other failure joined.
func parallel[T any](ctx context.Context, n int, items []T, fn func(context.Context, T) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, max(n, 1))
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for _, it := range items {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-sem }()
			if err := fn(ctx, it); err != nil {
				if errors.Is(err, context.Canceled) && ctx.Err() != nil {
					return // a consequence of another item's failure, or of the caller's cancel
				}
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				cancel()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
