package livecluster

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Write writes each object to dir/<object.File> (creating dir) and returns
// the paths written. Without force it writes nothing when any of the files
// exists, and never replaces one: a file that appears meanwhile fails.
func Write(dir string, objs []Object, force bool) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("--out %s: %w", dir, err)
	}
	paths := make([]string, len(objs))
	var exist []string
	for i, o := range objs {
		paths[i] = filepath.Join(dir, o.File)
		if _, err := os.Lstat(paths[i]); err == nil {
			exist = append(exist, paths[i])
		}
	}
	if len(exist) > 0 && !force {
		return nil, fmt.Errorf("refusing to overwrite %s (--force replaces them)", strings.Join(exist, ", "))
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if force {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	for i, o := range objs {
		if err := writeFile(paths[i], flags, o.YAML); err != nil {
			if errors.Is(err, fs.ErrExist) {
				return paths[:i], fmt.Errorf("refusing to overwrite %s, created while importing (--force replaces it)", paths[i])
			}
			return paths[:i], err
		}
	}
	return paths, nil
}

func writeFile(path string, flags int, data []byte) error {
	f, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
