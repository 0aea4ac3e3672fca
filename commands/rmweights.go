package commands

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/ttmodel/tt-model/hub"
)

// removeWeights is `rm --weights ORG/NAME[@REV]`: the whole weights repo of the cache, or one
// revision of it (a commit, or the commit a branch or tag of the cache names) with the refs that
// name it.
func removeWeights(out io.Writer, cache hub.Cache, arg string) error {
	repo, rev, pinned := strings.Cut(arg, "@")
	if err := hub.ValidateRepoID(repo); err != nil || !strings.Contains(repo, "/") {
		return exitf(exitInvalid, "--weights %q: want ORG/NAME or ORG/NAME@REV", arg)
	}
	dir := cache.RepoDir(repo)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return exitf(1, "no weights %s in the HF cache %s", repo, cache.Dir)
	}
	if !pinned {
		for _, p := range []string{dir, filepath.Join(cache.Dir, ".locks", hub.RepoFolderName(repo))} {
			if err := os.RemoveAll(p); err != nil {
				return &ExitError{Code: 1, Err: fmt.Errorf("remove %s: %w", p, err)}
			}
		}
		fmt.Fprintf(out, "removed %s  %s\n", repo, dir)
		return nil
	}
	commit := rev
	if !hub.IsCommit(rev) {
		var err error
		if commit, err = cache.ReadRef(repo, rev); err != nil {
			return &ExitError{Code: 1, Err: err}
		}
		if commit == "" {
			return exitf(1, "no ref %q of %s in the HF cache %s", rev, repo, cache.Dir)
		}
	}
	snap := cache.SnapshotDir(repo, commit)
	if _, err := os.Stat(snap); errors.Is(err, fs.ErrNotExist) {
		return exitf(1, "no snapshot %s of %s in the HF cache %s", commit, repo, cache.Dir)
	}
	if err := cache.DropSnapshot(repo, commit); err != nil {
		return &ExitError{Code: 1, Err: err}
	}
	// A ref left naming the removed commit would send an offline loader to a folder that is gone.
	refs := filepath.Join(dir, "refs")
	err := filepath.WalkDir(refs, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err == nil && strings.TrimSpace(string(b)) == commit {
			rel, _ := filepath.Rel(refs, p)
			if err := os.Remove(p); err != nil {
				return err
			}
			fmt.Fprintf(out, "removed ref %s of %s (it named %s)\n", filepath.ToSlash(rel), repo, commit)
		}
		return err
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return &ExitError{Code: 1, Err: fmt.Errorf("refs of %s: %w", repo, err)}
	}
	fmt.Fprintf(out, "removed %s@%s  %s\n", repo, commit, snap)
	return nil
}
