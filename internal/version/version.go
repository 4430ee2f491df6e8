// Package version reports what build of snapflow is running.
package version

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
)

// Set at link time: -X github.com/snapflow/snapflow/internal/version.Version=...
var (
	Version = "dev"
	Commit  = ""
)

// Info describes the running build.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit,omitempty"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
	// Image is the container image this process runs from, as the chart
	// deployed it (with its digest when pinned); empty outside one.
	Image string `json:"image,omitempty"`
}

// ImageEnv is where the chart tells each container its own image: a binary
// cannot hold the digest of the image it is part of.
const ImageEnv = "SNAPFLOW_IMAGE"

// Get returns the build info, filling the commit from the Go build info when
// the linker did not set it.
func Get() Info {
	commit := Commit
	if commit == "" {
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" {
					commit = s.Value
				}
			}
		}
	}
	return Info{
		Version:   Version,
		Commit:    commit,
		GoVersion: runtime.Version(),
		Platform:  fmt.Sprintf("%s/%s", runtime.GOOS, runtime.GOARCH),
		Image:     os.Getenv(ImageEnv),
	}
}
