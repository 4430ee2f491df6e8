package kopiaflags

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kopia/kopia/repo/compression"
)

// Compressor checks a compression.compressor against the compressors the
// linked kopia has, so a misspelt name is refused at admission instead of
// failing every upload.
func Compressor(name string) error {
	if name == "" || name == "none" {
		return nil
	}
	if compression.ByName[compression.Name(name)] != nil {
		return nil
	}
	known := make([]string, 0, len(compression.ByName))
	for n := range compression.ByName {
		if !compression.IsDeprecated[n] {
			known = append(known, string(n))
		}
	}
	slices.Sort(known)
	return fmt.Errorf("kopia has no compressor %q; use one of %s, or none", name, strings.Join(known, ", "))
}

// NeverCompress turns compression.neverCompress entries into the file
// extensions kopia matches: kopia compares a file's last extension (".gz")
// with a sorted list, so the globs users write ("*.gz") would match
// nothing. "*.gz" and ".gz" both mean files ending in .gz; anything else
// (a path, a glob in the middle, "*.tar.gz", whose last extension is .gz)
// cannot be said to kopia: the error names the first such entry, and the
// extensions of the others are returned all the same.
func NeverCompress(globs []string) ([]string, error) {
	exts := make([]string, 0, len(globs))
	var err error
	for i, g := range globs {
		ext := strings.TrimPrefix(g, "*")
		if !strings.HasPrefix(ext, ".") || len(ext) < 2 || strings.ContainsAny(ext[1:], "./\\*?[]{} ") {
			if err == nil {
				err = fmt.Errorf("entry %d (%q): kopia skips compression by file extension only; write one extension as \"*.gz\" or \".gz\"", i, g)
			}
			continue
		}
		exts = append(exts, ext)
	}
	slices.Sort(exts)
	return slices.Compact(exts), err
}
