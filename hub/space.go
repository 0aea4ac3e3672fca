package hub

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// checkSpace refuses a download the cache's filesystem cannot hold. A full
// disk mid-download leaves a cache that looks nearly complete; saying so
// before the first byte is the useful moment.
func (c *Client) checkSpace(repo string, files []RepoFile) error {
	var need int64
	for _, f := range files {
		need += f.Size
		if fi, err := os.Stat(c.cache.BlobPath(repo, f.Etag()) + ".incomplete"); err == nil {
			need -= min(fi.Size(), f.Size)
		}
	}
	dir := c.cache.Dir
	for {
		if _, err := os.Stat(dir); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return nil
		}
		dir = parent
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return nil // cannot tell: let the download report the truth
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	if need > free {
		return fmt.Errorf("not enough disk space for %s: %s more needed, %s free in %s (point HF_HOME or HF_HUB_CACHE at a bigger disk)",
			repo, FormatBytes(need), FormatBytes(free), c.cache.Dir)
	}
	return nil
}
