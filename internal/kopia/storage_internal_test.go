package kopia

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"syscall"
	"testing"

	kopiafs "github.com/kopia/kopia/fs"
)

// Only what the source did wrong may be called a file error; anything the
// storage did is the storage's, whatever the entry it surfaced on.
func TestEntryFromStorageTellsStorageFromSource(t *testing.T) {
	const source = "/data"
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"a source file that cannot be opened", fmt.Errorf("unable to open file: %w", &fs.PathError{Op: "open", Path: "/data/db/x", Err: syscall.EACCES}), false},
		{"a source read error", &fs.PathError{Op: "read", Path: "/data/x", Err: syscall.EIO}, false},
		{"the source directory itself", &fs.PathError{Op: "readdirent", Path: "/data", Err: syscall.EIO}, false},
		{"a relative source path", &fs.PathError{Op: "open", Path: "x", Err: syscall.EACCES}, false},
		{"an entry kopia cannot type", fmt.Errorf("entry: %w", kopiafs.ErrUnknown), false},
		{"a rename in a filesystem repository", fmt.Errorf("PutBlobInPath: %w", &os.LinkError{Op: "rename", Old: "/repository/p1/x.tmp", New: "/repository/p1/x", Err: syscall.ESTALE}), true},
		{"an expired session token", fmt.Errorf("PutBlob: %w", errors.New("The provided token has expired")), true},
		{"an error that names no path", errors.New("something the storage said"), true},
		{"a sibling that only shares the prefix", &fs.PathError{Op: "write", Path: "/data-repo/p0/blob", Err: syscall.ENOSPC}, true},
		{"a filesystem repository that is full", fmt.Errorf("PutBlob: %w", &fs.PathError{Op: "write", Path: "/repository/p1/blob", Err: syscall.ENOSPC}), true},
		{"a refused connection", fmt.Errorf("unable to write content chunk: %w", refused), true},
		{"a refused connection, flattened by a wrapper", errors.New("unable to complete PutBlob(p123) despite 10 retries: dial tcp 127.0.0.1:9000: connect: connection refused"), true},
		{"S3 throttling", errors.New("PutBlob(p1): SlowDown: Please reduce your request rate"), true},
		{"none", nil, false},
	}
	for _, tc := range tests {
		if got := entryFromStorage(tc.err, source); got != tc.want {
			t.Errorf("%s: entryFromStorage = %v, want %v", tc.name, got, tc.want)
		}
	}
}
