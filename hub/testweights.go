package hub

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// TestWeightsFile marks a folder of weights that a tool generated (a random
// checkpoint of the demos or tests) instead of the repo it stands in for.
// Its first line says what made them. It sits beside the weights: in a
// checkpoint folder it is written with them, `weights import` carries it into
// the snapshot as one of the commit's files, the local Hub serves it with the
// rest, and a download takes it whatever the allow patterns say, so the
// weights are marked wherever they are stored. No repo of the real Hub has
// it.
const TestWeightsFile = ".tt-model-test-weights"

// testWeightsGenerator starts the safetensors "generator" metadata of the
// random checkpoints tt-model writes (rfdetr.RandomCheckpoint): a snapshot an
// older `make demo` imported without a marker is still told apart by it.
const testWeightsGenerator = "tt-model random"

// WriteTestWeightsMarker marks dir as generated weights: what says what made
// them (e.g. "tt-model random RF-DETR-base, seed 1").
func WriteTestWeightsMarker(dir, what string) error {
	what = strings.TrimSpace(what)
	if what == "" || strings.ContainsAny(what, "\r\n") {
		return fmt.Errorf("test weights marker of %s: want one line saying what made them, got %q", dir, what)
	}
	if err := os.WriteFile(filepath.Join(dir, TestWeightsFile), []byte(what+"\n"), 0o644); err != nil {
		return fmt.Errorf("test weights marker: %w", err)
	}
	return nil
}

// TestWeightsIn says whether the weights folder dir holds generated weights
// and what made them: its marker's first line, else the "generator" a random
// checkpoint of tt-model stamps in a safetensors header at the folder's top.
// A folder that cannot be read is not reported (loading it reports that).
func TestWeightsIn(dir string) (what string, ok bool) {
	if dir == "" {
		return "", false
	}
	if b, err := os.ReadFile(filepath.Join(dir, TestWeightsFile)); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		if line = strings.TrimSpace(line); line == "" {
			line = "a tool of tt-model"
		}
		return line, true
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", false
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".safetensors") {
			continue
		}
		if g := safetensorsGenerator(filepath.Join(dir, e.Name())); strings.HasPrefix(g, testWeightsGenerator) {
			return g, true
		}
	}
	return "", false
}

// TestWeightsNotice is the one sentence every place that shows weights says
// about generated ones standing in for repo.
func TestWeightsNotice(repo, what string) string {
	if repo == "" {
		return fmt.Sprintf("random test weights (%s): the outputs are meaningless", what)
	}
	return fmt.Sprintf("random test weights, not %s (%s): the outputs are meaningless", repo, what)
}

// safetensorsGenerator reads the "generator" of a safetensors file's
// __metadata__, "" when it has none or is not a safetensors file.
func safetensorsGenerator(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	var n uint64
	if err := binary.Read(f, binary.LittleEndian, &n); err != nil || n < 2 || n > 100<<20 {
		return ""
	}
	// The metadata is usually first; the header of a full checkpoint is a few hundred KiB.
	head := make([]byte, n)
	if _, err := io.ReadFull(f, head); err != nil {
		return ""
	}
	var h struct {
		Metadata map[string]string `json:"__metadata__"`
	}
	if err := json.NewDecoder(bytes.NewReader(head)).Decode(&h); err != nil {
		return ""
	}
	return h.Metadata["generator"]
}

// withTestWeightsMarker adds the marker to a download's selection when the
// commit lists one, whatever the allow and ignore patterns say: test weights
// stay marked in every cache that pulls them.
func withTestWeightsMarker(all, selected []RepoFile) []RepoFile {
	for _, f := range selected {
		if f.Path == TestWeightsFile {
			return selected
		}
	}
	for _, f := range all {
		if f.Path == TestWeightsFile {
			return append(selected, f)
		}
	}
	return selected
}

// DropSnapshot removes one commit of repo from the cache: its snapshot
// folder, its saved file list, and the blobs no other snapshot of the repo
// links to. refs/ are left alone: a later download of the same commit points
// them at it again. It is how `weights pull --refresh` makes room for the
// real files of a commit generated weights were stored under.
func (c Cache) DropSnapshot(repo, commit string) error {
	if err := ValidateRepoID(repo); err != nil {
		return err
	}
	if !IsCommit(commit) {
		return fmt.Errorf("drop %s@%s: not a 40-hex commit", repo, commit)
	}
	used := map[string]bool{} // blobs other snapshots link to
	snaps := filepath.Join(c.RepoDir(repo), "snapshots")
	others, err := os.ReadDir(snaps)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("drop %s@%s: %w", repo, commit, err)
	}
	for _, o := range others {
		if o.Name() != commit {
			if err := snapshotBlobs(filepath.Join(snaps, o.Name()), used); err != nil {
				return fmt.Errorf("drop %s@%s: %w", repo, commit, err)
			}
		}
	}
	mine := map[string]bool{}
	dir := c.SnapshotDir(repo, commit)
	if err := snapshotBlobs(dir, mine); err != nil {
		return fmt.Errorf("drop %s@%s: %w", repo, commit, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("drop %s@%s: %w", repo, commit, err)
	}
	if err := os.Remove(c.listingPath(repo, commit)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("drop %s@%s: %w", repo, commit, err)
	}
	blobs := filepath.Join(c.RepoDir(repo), "blobs")
	for b := range mine {
		if used[b] {
			continue
		}
		if err := os.Remove(filepath.Join(blobs, b)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("drop %s@%s: %w", repo, commit, err)
		}
	}
	return nil
}

// snapshotBlobs adds the blob names the links under dir point at to into.
func snapshotBlobs(dir string, into map[string]bool) error {
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink == 0 {
			return err
		}
		target, err := os.Readlink(p)
		if err != nil {
			return err
		}
		if filepath.Base(filepath.Dir(target)) == "blobs" {
			into[filepath.Base(target)] = true
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}
