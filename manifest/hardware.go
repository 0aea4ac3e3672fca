package manifest

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// meshPresets is the plugin's closed MESH_DEVICE table: anything else (but a
// "(rows, cols)" literal) raises at boot, so it is refused at load instead.
var meshPresets = map[string][2]int{
	"N150": {1, 1}, "P100": {1, 1}, "P150": {1, 1},
	"P150x2": {1, 2}, "N300": {1, 2}, "P300": {1, 2},
	"N150x4": {1, 4}, "P150x4": {1, 4}, "P300x2": {1, 4},
	"T3K": {1, 8}, "P150x8": {1, 8},
	"QB2": {2, 2},
	"TG":  {4, 8}, "BH-Galaxy": {4, 8},
}

// Board architectures, as Tenstorrent's drivers and device plugins name them.
const (
	ArchBlackhole = "blackhole"
	ArchWormhole  = "wormhole"
	ArchGrayskull = "grayskull"
)

// board is one board family: its chips and their architecture.
type board struct {
	chips int
	arch  string
}

// boards is every board family a hardware label may name, keyed by its base
// (no revision letter). The label names boards, never the box they sit in: a
// QB2 is "p300x2", a T3000 "n300x4".
var boards = map[string]board{
	"p100": {1, ArchBlackhole}, "p150": {1, ArchBlackhole}, "p300": {2, ArchBlackhole},
	"n150": {1, ArchWormhole}, "n300": {2, ArchWormhole},
	"e75": {1, ArchGrayskull}, "e150": {1, ArchGrayskull},
}

// hardwareRE is the hardware-label grammar: <family>[revision][x<boards>],
// "p150", "p150a", "p300x2".
var hardwareRE = regexp.MustCompile(`^([a-z]\d+)([a-z]?)(?:x(\d+))?$`)

// Hardware is a parsed hardware label.
type Hardware struct {
	Board    string // the family, without its revision letter: p150, n300
	Revision string // the board revision letter ("a" of p150a), or ""
	Arch     string // ArchBlackhole, ArchWormhole or ArchGrayskull
	Boards   int    // how many boards (the xN), 1 without one
	PerBoard int    // chips on one board
}

// Chips is the number of chips the label implies ("p300x2" → 4).
func (h Hardware) Chips() int { return h.Boards * h.PerBoard }

// ParseHardware reads a hardware label (case and surrounding space
// ignored), or says why it is not one.
func ParseHardware(label string) (Hardware, error) {
	m := hardwareRE.FindStringSubmatch(strings.ToLower(strings.TrimSpace(label)))
	if m == nil {
		return Hardware{}, fmt.Errorf("%q is not a board label: want <board>[xN] with board one of %s", label, strings.Join(BoardNames(), ", "))
	}
	b, ok := boards[m[1]]
	if !ok {
		return Hardware{}, fmt.Errorf("%q names no known board: want one of %s", label, strings.Join(BoardNames(), ", "))
	}
	n := 1
	if m[3] != "" {
		var err error
		if n, err = strconv.Atoi(m[3]); err != nil || n < 1 {
			return Hardware{}, fmt.Errorf("%q: board count %q is not a positive number", label, m[3])
		}
	}
	return Hardware{Board: m[1], Revision: m[2], Arch: b.arch, Boards: n, PerBoard: b.chips}, nil
}

// BoardNames lists the known board families, sorted.
func BoardNames() []string { return slices.Sorted(maps.Keys(boards)) }

// MeshPresetNames lists the presets in a stable order for messages.
func MeshPresetNames() []string {
	names := make([]string, 0, len(meshPresets))
	for k := range meshPresets {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := meshPresets[names[i]], meshPresets[names[j]]
		if a[0]*a[1] != b[0]*b[1] {
			return a[0]*a[1] < b[0]*b[1]
		}
		return names[i] < names[j]
	})
	return names
}

// ChipCount is the number of chips a hardware label implies ("p300x2" → 4),
// and false for a label it cannot read. A trailing board-revision letter
// (p150a) does not change the count.
func ChipCount(hardware string) (int, bool) {
	h, err := ParseHardware(hardware)
	if err != nil {
		return 0, false
	}
	return h.Chips(), true
}

// MeshShape resolves a MESH_DEVICE string, a preset or a "(rows, cols)"
// literal, to its shape, mirroring the plugin's parser.
func MeshShape(meshDevice string) (rows, cols int, err error) {
	if r, c, ok := parseMeshLiteral(meshDevice); ok {
		return r, c, nil
	}
	if s, ok := meshPresets[meshDevice]; ok {
		return s[0], s[1], nil
	}
	return 0, 0, fmt.Errorf("%q is not a mesh preset (want one of %s, or \"(r, c)\")",
		meshDevice, strings.Join(MeshPresetNames(), ", "))
}

// parseMeshLiteral reads "(1, 4)" or "[1, 4]", what Python's literal_eval
// turns into a two-element tuple or list of integers.
func parseMeshLiteral(s string) (int, int, bool) {
	s = strings.TrimSpace(s)
	if len(s) < 2 || !((s[0] == '(' && s[len(s)-1] == ')') || (s[0] == '[' && s[len(s)-1] == ']')) {
		return 0, 0, false
	}
	parts := strings.Split(s[1:len(s)-1], ",")
	if len(parts) == 3 && strings.TrimSpace(parts[2]) == "" {
		parts = parts[:2]
	}
	if len(parts) != 2 {
		return 0, 0, false
	}
	r, err1 := strconv.Atoi(strings.TrimSpace(parts[0]))
	c, err2 := strconv.Atoi(strings.TrimSpace(parts[1]))
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return r, c, true
}
