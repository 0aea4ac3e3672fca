package manifest

import (
	"fmt"
	"regexp"
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

// boardChips is chips per board, keyed by the base of a hardware label. The
// label names boards, never the box they sit in: a QB2 is "p300x2".
var boardChips = map[string]int{"p100": 1, "p150": 1, "n150": 1, "e150": 1, "p300": 2, "n300": 2}

var hardwareRE = regexp.MustCompile(`^([a-z]\d+[a-z]?)(?:x(\d+))?$`)

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
	m := hardwareRE.FindStringSubmatch(strings.ToLower(strings.TrimSpace(hardware)))
	if m == nil {
		return 0, false
	}
	per, ok := boardChips[m[1]]
	if !ok {
		per, ok = boardChips[strings.TrimRight(m[1], "abcdefghijklmnopqrstuvwxyz")]
	}
	if !ok {
		return 0, false
	}
	mult := 1
	if m[2] != "" {
		n, err := strconv.Atoi(m[2])
		if err != nil {
			return 0, false
		}
		mult = n
	}
	return per * mult, true
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
