package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"time"
)

// archiveFile is one entry of a CLI archive.
type archiveFile struct {
	name string
	mode int64
	data []byte
}

// archive is a tar.gz of files in the order given, owned by root, every
// time the commit's and no gzip name or time, so one commit gives the
// same bytes.
func archive(mtime time.Time, files []archiveFile) ([]byte, error) {
	var buf bytes.Buffer
	gz, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(gz)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: mtime, Typeflag: tar.TypeReg, Format: tar.FormatPAX, Uname: "root", Gname: "root"}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
