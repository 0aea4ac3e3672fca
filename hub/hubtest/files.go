package hubtest

import (
	"io/fs"
	"os"
	"path/filepath"
)

// FilesOf reads every file under dir as the files of a commit, paths relative to dir; weight
// formats and files of 10 MiB or more are stored with LFS, as a Hub repo's .gitattributes would.
func FilesOf(dir string) ([]File, error) {
	var files []File
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		ext := filepath.Ext(p)
		lfs := len(data) >= 10<<20 || ext == ".safetensors" || ext == ".bin" || ext == ".pt" || ext == ".pth"
		files = append(files, File{Path: filepath.ToSlash(rel), Data: data, LFS: lfs})
		return nil
	})
	return files, err
}
