// Package chips is tt-model's one chip-list grammar and its one
// enumeration of /dev/tenstorrent: `serve --device-id`, `supervise --chips`
// and the instances' devices label all read and write chip ids here.
package chips

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
)

// DevDir is where tt-kmd creates one device node per chip, named by its id.
const DevDir = "/dev/tenstorrent"

// MaxID bounds a chip id. tt-kmd numbers its nodes from 0 up to its
// max_devices module parameter (32 by default); 255 leaves room for a
// raised parameter and refuses a typo such as 0-100000 before anything is
// created for it.
const MaxID = 255

// Parse reads a chip list: comma-separated ids and inclusive ranges, e.g.
// "0,1" or "0-3,5". Every id is 0..MaxID and appears once; the list names at
// least one chip. The ids come back in the order written.
func Parse(list string) ([]int, error) {
	var ids []int
	for _, part := range strings.Split(list, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := id(lo)
		if err != nil {
			return nil, fmt.Errorf("chip list %q: %q: %w", list, part, err)
		}
		b := a
		if isRange {
			if b, err = id(hi); err != nil {
				return nil, fmt.Errorf("chip list %q: %q: %w", list, part, err)
			}
			if b < a {
				return nil, fmt.Errorf("chip list %q: range %q runs backwards", list, part)
			}
		}
		for n := a; n <= b; n++ {
			if slices.Contains(ids, n) {
				return nil, fmt.Errorf("chip list %q names chip %d twice", list, n)
			}
			ids = append(ids, n)
		}
	}
	return ids, nil
}

func id(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	switch {
	case s == "":
		return 0, errors.New("want a chip id or a range a-b")
	case err != nil || n < 0:
		return 0, errors.New("not a chip id (want 0, 1, …)")
	case n > MaxID:
		return 0, fmt.Errorf("chip id %d is above %d, more than a host can have", n, MaxID)
	}
	return n, nil
}

// Format writes ids as Parse reads them back: "0,1" ("" for none).
func Format(ids []int) string {
	s := make([]string, len(ids))
	for i, n := range ids {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

// Discover lists the chip ids of the device nodes in devDir, sorted; none
// when the folder is absent (a host without chips). It never opens a node:
// opening can re-initialise a hung chip.
func Discover(devDir string) ([]int, error) {
	entries, err := os.ReadDir(devDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list chips in %s: %w", devDir, err)
	}
	var ids []int
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Name()); err == nil && n >= 0 && n <= MaxID {
			ids = append(ids, n)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// Missing returns the ids of want that have is not (in want's order).
func Missing(want, have []int) []int {
	var out []int
	for _, n := range want {
		if !slices.Contains(have, n) {
			out = append(out, n)
		}
	}
	return out
}
