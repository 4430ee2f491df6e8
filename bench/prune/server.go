package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// serverStats counts what the in-process S3 server answered, by kind.
type serverStats struct {
	ListPagesDelimiter int64 `json:"listPagesDelimiter"`
	ListPagesRecursive int64 `json:"listPagesRecursive"`
	ListedObjects      int64 `json:"listedObjects"`
	ListedPrefixes     int64 `json:"listedPrefixes"`
	GetManifest        int64 `json:"getManifest"`
	GetOther           int64 `json:"getOther"`
	GetMissing         int64 `json:"getMissing"`
	Versioning         int64 `json:"versioning"`
	HeadBucket         int64 `json:"headBucket"`
	HeadObject         int64 `json:"headObject"`
	Other              int64 `json:"other"`
}

func (s serverStats) listPages() int64 { return s.ListPagesDelimiter + s.ListPagesRecursive }

func (s serverStats) others() int64 {
	return s.Versioning + s.HeadBucket + s.HeadObject + s.Other + s.GetMissing
}

type counters struct {
	listDelim, listRec, objs, prefixes, getMan, getOther, getMissing, versioning, headBucket, headObject, other atomic.Int64
}

func (c *counters) snapshot() serverStats {
	return serverStats{ListPagesDelimiter: c.listDelim.Load(), ListPagesRecursive: c.listRec.Load(), ListedObjects: c.objs.Load(),
		ListedPrefixes: c.prefixes.Load(), GetManifest: c.getMan.Load(), GetOther: c.getOther.Load(), GetMissing: c.getMissing.Load(),
		Versioning: c.versioning.Load(), HeadBucket: c.headBucket.Load(), HeadObject: c.headObject.Load(), Other: c.other.Load()}
}

func (c *counters) reset() {
	for _, v := range []*atomic.Int64{&c.listDelim, &c.listRec, &c.objs, &c.prefixes, &c.getMan, &c.getOther, &c.getMissing,
		&c.versioning, &c.headBucket, &c.headObject, &c.other} {
		v.Store(0)
	}
}

// s3Server implements just enough of the S3 REST API (path-style) for the
// adapter: ListObjectsV2 (prefix, delimiter, continuation-token,
// start-after, max-keys up to 1000), GetObject, HeadObject,
// GetBucketVersioning (never versioned) and HeadBucket. /-/stats and
// /-/reset serve the benchmark driver. Authentication is not checked.
type s3Server struct {
	b *bucket
	n counters
}

const maxKeys = 1000

func (s *s3Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/-/stats":
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.n.snapshot())
		return
	case "/-/reset":
		s.n.reset()
		return
	}
	bucketName, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if bucketName != s.b.name {
		s.n.other.Add(1)
		s3Error(w, http.StatusNotFound, "NoSuchBucket", "the bucket does not exist")
		return
	}
	q := r.URL.Query()
	switch {
	case key == "" && r.Method == http.MethodGet && q.Has("versioning"):
		s.n.versioning.Add(1)
		w.Header().Set("Content-Type", "application/xml")
		// A bucket that was never versioned has no Status.
		_, _ = io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+`<VersioningConfiguration></VersioningConfiguration>`)
	case key == "" && r.Method == http.MethodGet && q.Get("list-type") == "2":
		s.list(w, q)
	case key == "" && r.Method == http.MethodHead:
		s.n.headBucket.Add(1)
	case key != "" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		s.object(w, r, key)
	default:
		s.n.other.Add(1)
		s3Error(w, http.StatusNotImplemented, "NotImplemented", "not supported by the benchmark server")
	}
}

func s3Error(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+`<Error><Code>%s</Code><Message>%s</Message></Error>`, code, msg)
}

const timeFormat = "2006-01-02T15:04:05.000Z"

func etag(i int) string {
	h1 := uint64(i)*0x9e3779b97f4a7c15 ^ 0x5851f42d4c957f2d
	h2 := (uint64(i) + 1) * 0xbf58476d1ce4e5b9
	return fmt.Sprintf("\"%016x%016x\"", h1, h2)
}

func (s *s3Server) list(w http.ResponseWriter, q map[string][]string) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	prefix, delim, token, startAfter := get("prefix"), get("delimiter"), get("continuation-token"), get("start-after")
	limit := maxKeys
	if v := get("max-keys"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n >= 0 && n < limit {
			limit = n
		}
	}
	if delim != "" && delim != "/" {
		s.n.other.Add(1)
		s3Error(w, http.StatusNotImplemented, "NotImplemented", "only the delimiter / is supported")
		return
	}
	if delim != "" {
		s.n.listDelim.Add(1)
	} else {
		s.n.listRec.Add(1)
	}
	b := s.b
	var i int
	if token != "" {
		n, err := strconv.Atoi(token)
		if err != nil || n < 0 || n > b.total() {
			s3Error(w, http.StatusBadRequest, "InvalidArgument", "bad continuation token")
			return
		}
		i = n
	} else {
		from := prefix
		if startAfter > from {
			from = startAfter + "\x00"
		}
		i = b.lowerBound(0, from)
	}
	var out bytes.Buffer
	out.Grow(300 * limit)
	out.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n" + `<ListBucketResult><Name>`)
	out.WriteString(b.name)
	out.WriteString(`</Name><Prefix>`)
	_ = xml.EscapeText(&out, []byte(prefix))
	out.WriteString(`</Prefix>`)
	if delim != "" {
		out.WriteString(`<Delimiter>/</Delimiter>`)
	}
	fmt.Fprintf(&out, `<MaxKeys>%d</MaxKeys>`, limit)
	if token != "" {
		out.WriteString(`<ContinuationToken>` + token + `</ContinuationToken>`)
	}
	var body bytes.Buffer
	body.Grow(300 * limit)
	objs, cps := 0, 0
	next, count, truncated := b.page(prefix, delim != "", i, limit, func(i int, key []byte) {
		g, j := b.locate(i)
		body.WriteString(`<Contents><Key>`)
		_ = xml.EscapeText(&body, key)
		body.WriteString(`</Key><LastModified>`)
		body.WriteString(g.mtime.UTC().Format(timeFormat))
		body.WriteString(`</LastModified><ETag>&quot;`)
		e := etag(i)
		body.WriteString(e[1 : len(e)-1])
		body.WriteString(`&quot;</ETag><Size>`)
		body.WriteString(strconv.FormatInt(g.objectSize(j), 10))
		body.WriteString(`</Size><StorageClass>STANDARD</StorageClass></Contents>`)
		objs++
	}, func(cp string) {
		body.WriteString(`<CommonPrefixes><Prefix>`)
		_ = xml.EscapeText(&body, []byte(cp))
		body.WriteString(`</Prefix></CommonPrefixes>`)
		cps++
	})
	s.n.objs.Add(int64(objs))
	s.n.prefixes.Add(int64(cps))
	fmt.Fprintf(&out, `<KeyCount>%d</KeyCount><IsTruncated>%t</IsTruncated>`, count, truncated)
	if truncated {
		fmt.Fprintf(&out, `<NextContinuationToken>%d</NextContinuationToken>`, next)
	}
	out.Write(body.Bytes())
	out.WriteString(`</ListBucketResult>`)
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("Content-Length", strconv.Itoa(out.Len()))
	_, _ = w.Write(out.Bytes())
}

func (s *s3Server) object(w http.ResponseWriter, r *http.Request, key string) {
	i := s.b.find(key)
	if i < 0 {
		if r.Method == http.MethodHead {
			s.n.headObject.Add(1)
			w.WriteHeader(http.StatusNotFound)
			return
		}
		s.n.getMissing.Add(1)
		s3Error(w, http.StatusNotFound, "NoSuchKey", "the key does not exist")
		return
	}
	g, j := s.b.locate(i)
	var body []byte
	if g.isManifest(j) {
		body = manifestBody(g.man)
	}
	size := g.objectSize(j)
	h := w.Header()
	h.Set("ETag", etag(i))
	h.Set("Last-Modified", g.mtime.UTC().Format(http.TimeFormat))
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Length", strconv.FormatInt(size, 10))
	if r.Method == http.MethodHead {
		s.n.headObject.Add(1)
		return
	}
	if body != nil {
		s.n.getMan.Add(1)
		_, _ = w.Write(body)
		return
	}
	s.n.getOther.Add(1)
	// An ordinary object: zeros of its size (the planner should never ask).
	zero := make([]byte, 64<<10)
	for left := size; left > 0; left -= int64(len(zero)) {
		if _, err := w.Write(zero[:min(left, int64(len(zero)))]); err != nil {
			return
		}
	}
}

// serve runs the server of one layout until stdin closes; it prints its
// base URL on stdout first.
func serve(p params) error {
	l := buildLayout(p, true)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: &s3Server{b: l.bucket}, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	fmt.Printf("http://%s\n", ln.Addr())
	// The driver closes our stdin to stop us.
	_, _ = io.Copy(io.Discard, bufio.NewReader(os.Stdin))
	return srv.Close()
}
