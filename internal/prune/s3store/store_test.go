package s3store

import (
	"bytes"
	"context"
	"crypto/md5" //nolint:gosec // Content-MD5 is what S3 asks for
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/snapflow/snapflow/internal/prune"
)

// fakeS3 answers canned XML and records every request it saw.
type fakeS3 struct {
	mu       sync.Mutex
	reqs     []recorded
	pages    []string // ListObjectsV2 / ListObjectVersions bodies, in order
	deleteFn func(body []byte) string
	getBody  []byte
}

type recorded struct {
	method string
	query  string
	header http.Header
	body   []byte
}

func (f *fakeS3) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, recorded{method: r.Method, query: r.URL.RawQuery, header: r.Header.Clone(), body: body})
	f.mu.Unlock()
	q := r.URL.Query()
	w.Header().Set("Content-Type", "application/xml")
	switch {
	case r.Method == http.MethodPost && q.Has("delete"):
		_, _ = io.WriteString(w, f.deleteFn(body))
	case q.Has("versioning"):
		_, _ = io.WriteString(w, `<VersioningConfiguration><Status>Enabled</Status></VersioningConfiguration>`)
	case q.Get("list-type") == "2" || q.Has("versions"):
		f.mu.Lock()
		page := f.pages[0]
		f.pages = f.pages[1:]
		f.mu.Unlock()
		_, _ = io.WriteString(w, page)
	case r.Method == http.MethodGet:
		_, _ = w.Write(f.getBody)
	default:
		http.Error(w, "unexpected", http.StatusBadRequest)
	}
}

func (f *fakeS3) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.reqs...)
}

func newFake(t *testing.T, f *fakeS3, gcs bool, debug io.Writer, token string) *Store {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	s, err := New(Config{Bucket: "bkt", Endpoint: srv.URL, PathStyle: true, Region: "us-east-1",
		Credentials: Static("AKIDFAKEKEY12345", "fake-secret-value", token), Debug: debug, forceGCS: gcs})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type deleteBody struct {
	Quiet   string `xml:"Quiet"`
	Objects []struct {
		Key       string `xml:"Key"`
		VersionID string `xml:"VersionId"`
		ETag      string `xml:"ETag"`
	} `xml:"Object"`
}

func allDeleted(body []byte) string {
	var d deleteBody
	_ = xml.Unmarshal(body, &d)
	var b strings.Builder
	b.WriteString("<DeleteResult>")
	for _, o := range d.Objects {
		fmt.Fprintf(&b, "<Deleted><Key>%s</Key></Deleted>", o.Key)
	}
	b.WriteString("</DeleteResult>")
	return b.String()
}

// DeleteObjects: 1001 targets go in two Quiet=false requests, each with a
// correct Content-MD5 and no flexible checksum, and a VersionId only where
// set; a batch over 1000 is refused.
func TestDeleteObjectsContentMD5AndBatches_7(t *testing.T) {
	f := &fakeS3{deleteFn: allDeleted}
	s := newFake(t, f, false, nil, "")
	var targets []prune.DeleteTarget
	for i := range 1001 {
		targets = append(targets, prune.DeleteTarget{Key: fmt.Sprintf("p/k%04d", i), Size: 1})
	}
	targets[1000].VersionID = "v9"
	for _, b := range prune.Batch(targets, prune.MaxDeleteBatch) {
		del, failed, err := s.DeleteObjects(context.Background(), b)
		if err != nil || len(failed) != 0 || len(del) != len(b) {
			t.Fatalf("deleted %d failed %v err %v", len(del), failed, err)
		}
	}
	reqs := f.requests()
	// The SDK sends a request again after a transient transport error (a
	// loaded machine sees them), so batches are counted by their bodies.
	batches := map[string]bool{}
	for _, r := range reqs {
		batches[string(r.body)] = true
	}
	if len(batches) != 2 {
		t.Fatalf("%d distinct delete requests (of %d sent), want 2 batches", len(batches), len(reqs))
	}
	for i, r := range reqs {
		sum := md5.Sum(r.body) //nolint:gosec // Content-MD5
		if got, want := r.header.Get("Content-Md5"), base64.StdEncoding.EncodeToString(sum[:]); got != want {
			t.Errorf("request %d: Content-MD5 %q, want %q", i, got, want)
		}
		for h := range r.header {
			lh := strings.ToLower(h)
			if strings.HasPrefix(lh, "x-amz-checksum-") || lh == "x-amz-trailer" || lh == "x-amz-sdk-checksum-algorithm" {
				t.Errorf("request %d carries %s", i, h)
			}
		}
		if strings.Contains(r.header.Get("Content-Encoding"), "aws-chunked") {
			t.Errorf("request %d is aws-chunked", i)
		}
		var d deleteBody
		if err := xml.Unmarshal(r.body, &d); err != nil {
			t.Fatal(err)
		}
		if d.Quiet != "false" {
			t.Errorf("request %d: Quiet %q", i, d.Quiet)
		}
		for _, o := range d.Objects {
			if o.ETag != "" {
				t.Errorf("ETag sent for %s", o.Key)
			}
			if (o.VersionID != "") != (o.Key == "p/k1000") {
				t.Errorf("%s: VersionId %q", o.Key, o.VersionID)
			}
		}
	}
	if len(reqs[0].body) == 0 || strings.Count(string(reqs[0].body), "<Object>") != 1000 {
		t.Fatal("first batch must hold 1000 objects")
	}
	if st := s.Stats(); st.DeleteRequests != 2 || st.DeletedObjects != 1001 {
		t.Fatalf("stats %+v", st)
	}
	if _, _, err := s.DeleteObjects(context.Background(), targets); err == nil {
		t.Fatal("a batch over 1000 must be refused before sending")
	}
}

// DeleteObjects results: deleted and error entries are reported per key,
// and an empty result counts as success.
func TestDeleteObjectsResults_7_4(t *testing.T) {
	tests := []struct {
		name      string
		resp      string
		wantObjs  int
		wantError string
	}{
		{"partial", `<DeleteResult><Deleted><Key>a</Key></Deleted><Error><Key>b</Key><Code>AccessDenied</Code><Message>denied</Message></Error></DeleteResult>`, 1, "AccessDenied"},
		{"empty result", `<DeleteResult></DeleteResult>`, 2, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeS3{deleteFn: func([]byte) string { return tt.resp }}
			s := newFake(t, f, false, nil, "")
			batch := []prune.DeleteTarget{{Key: "a", Size: 3}, {Key: "b", Size: 4}}
			del, failed, err := s.DeleteObjects(context.Background(), batch)
			if err != nil {
				t.Fatal(err)
			}
			n, _, terr := prune.TallyBatch(batch, del, failed)
			if n != tt.wantObjs || (tt.wantError == "") != (terr == nil) || terr != nil && !strings.Contains(terr.Error(), tt.wantError) {
				t.Fatalf("tally %d, err %v", n, terr)
			}
		})
	}
}

// A delimiter listing merges its pages and keeps only keys in normal form
// that lie inside the prefix by whole segments.
func TestListLevelMergesPages(t *testing.T) {
	f := &fakeS3{pages: []string{
		`<ListBucketResult><IsTruncated>true</IsTruncated><NextContinuationToken>t1</NextContinuationToken>
<Contents><Key>a/x</Key><Size>3</Size><ETag>"e1"</ETag><LastModified>2026-01-01T00:00:00.000Z</LastModified></Contents>
<Contents><Key>a/../escape</Key><Size>1</Size><ETag>"e9"</ETag></Contents>
<CommonPrefixes><Prefix>a/z/</Prefix></CommonPrefixes><CommonPrefixes><Prefix>a/b/</Prefix></CommonPrefixes></ListBucketResult>`,
		`<ListBucketResult><IsTruncated>false</IsTruncated>
<Contents><Key>ab/not-inside</Key><Size>1</Size><ETag>"e2"</ETag></Contents>
<CommonPrefixes><Prefix>a/b/</Prefix></CommonPrefixes><CommonPrefixes><Prefix>a/c/</Prefix></CommonPrefixes></ListBucketResult>`,
	}}
	s := newFake(t, f, false, nil, "")
	objs, dirs, err := s.ListLevel(context.Background(), "a", false)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(dirs, ",") != "b,c,z" {
		t.Fatalf("dirs %v", dirs)
	}
	if len(objs) != 1 || objs[0].Key != "a/x" || objs[0].Size != 3 || objs[0].ETag != `"e1"` || objs[0].LastModified.IsZero() {
		t.Fatalf("objects %+v", objs)
	}
	reqs := f.requests()
	if len(reqs) != 2 || !strings.Contains(reqs[1].query, "continuation-token=t1") || !strings.Contains(reqs[0].query, "delimiter=%2F") {
		t.Fatalf("requests %+v", reqs)
	}
	if s.Stats().ListPages != 2 {
		t.Fatalf("stats %+v", s.Stats())
	}
}

// Cloud Storage compatibility, forced on: generations in plain and version
// listings, generations sent as VersionId, and the unsigned headers.
func TestGCSCompat_8(t *testing.T) {
	f := &fakeS3{pages: []string{
		`<ListBucketResult><IsTruncated>false</IsTruncated>
<Contents><Key>r/a</Key><Size>1</Size><ETag>"e"</ETag><Generation>7</Generation></Contents>
<Contents><Key>r/b</Key><Size>1</Size><ETag>"f"</ETag></Contents></ListBucketResult>`,
		`<ListVersionsResult><IsTruncated>false</IsTruncated>
<Version><Key>r/a</Key><VersionId>7</VersionId><IsLatest>true</IsLatest><Size>1</Size><ETag>"e"</ETag></Version></ListVersionsResult>`,
	}, deleteFn: allDeleted}
	s := newFake(t, f, true, nil, "")
	ctx := context.Background()
	objs, err := s.ListAll(ctx, "r", false)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 || objs[0].Generation != "7" || objs[1].Generation != "" {
		t.Fatalf("objects %+v", objs)
	}
	vs, err := s.ListAll(ctx, "r", true)
	if err != nil || len(vs) != 1 || vs[0].VersionID != "7" {
		t.Fatalf("versions %+v %v", vs, err)
	}
	// The generation is sent as VersionId; an object without one stops the
	// candidate before any request.
	c := prune.Candidate{Type: prune.TypeOrphanVolumeRoot, Objects: objs[:1]}
	batches, err := prune.DeleteBatches(c, prune.DeleteIdentity{GCS: s.GCS()}, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.DeleteObjects(ctx, batches[0]); err != nil {
		t.Fatal(err)
	}
	c.Objects = objs[1:]
	if _, err := prune.DeleteBatches(c, prune.DeleteIdentity{GCS: true}, ""); err == nil || !strings.Contains(err.Error(), "identity missing") {
		t.Fatalf("err %v", err)
	}
	// Every other operation keeps working with the middleware in place.
	if st, err := s.BucketVersioning(ctx); err != nil || st != "Enabled" {
		t.Fatalf("versioning %q %v", st, err)
	}
	f.getBody = []byte("{}")
	if _, err := s.ReadManifest(ctx, "r/a", ""); err != nil {
		t.Fatal(err)
	}
	reqs := f.requests()
	if len(reqs) != 5 {
		t.Fatalf("%d requests", len(reqs))
	}
	for i, r := range reqs {
		signed := signedHeaders(r.header.Get("Authorization"))
		for _, h := range []string{"accept-encoding", "amz-sdk-invocation-id", "amz-sdk-request"} {
			if strings.Contains(signed, h) {
				t.Errorf("request %d signs %s: %s", i, h, signed)
			}
		}
		if got := r.header.Get("Accept-Encoding"); got != "identity" {
			t.Errorf("request %d: Accept-Encoding %q", i, got)
		}
		versions := strings.Contains(r.query, "versions")
		if versions != strings.Contains(signed, gcsInteropHeader) || versions != (r.header.Get(gcsInteropHeader) == "enabled") {
			t.Errorf("request %d (%s): interop header signed=%s value=%q", i, r.query, signed, r.header.Get(gcsInteropHeader))
		}
	}
	if !bytes.Contains(reqs[2].body, []byte("<VersionId>7</VersionId>")) || bytes.Contains(reqs[2].body, []byte("<ETag>")) {
		t.Fatalf("delete body %s", reqs[2].body)
	}
}

func signedHeaders(auth string) string {
	_, after, _ := strings.Cut(auth, "SignedHeaders=")
	before, _, _ := strings.Cut(after, ",")
	return before
}

// Which endpoints are the Cloud Storage XML API.
func TestIsGCSEndpoint_8_1(t *testing.T) {
	for ep, want := range map[string]bool{
		"https://storage.googleapis.com":                  true,
		"https://storage.googleapis.com.":                 true,
		"https://storage.mtls.googleapis.com":             true,
		"https://storage-download.googleapis.com":         true,
		"https://bucket.storage.googleapis.com":           true,
		"storage.googleapis.com":                          true,
		"https://STORAGE.googleapis.com:443/path":         true,
		"https://storageinsights.googleapis.com":          false,
		"https://googleapis.com":                          false,
		"https://storage.googleapis.com.example.test":     false,
		"https://s3.amazonaws.com":                        false,
		"http://[::1":                                     false,
		"":                                                false,
		"https://storage.googleapis.com.evil.example.com": false,
	} {
		if got := IsGCSEndpoint(ep); got != want {
			t.Errorf("IsGCSEndpoint(%q) = %v, want %v", ep, got, want)
		}
	}
}

// Signing diagnostics carry no credential.
func TestDebugRedactsCredentials_10_9(t *testing.T) {
	f := &fakeS3{pages: []string{`<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>`}}
	var log bytes.Buffer
	s := newFake(t, f, false, &log, "session-token-secret")
	if _, err := s.ListAll(context.Background(), "", false); err != nil {
		t.Fatal(err)
	}
	out := log.String()
	if !strings.Contains(out, "debug: ") || !strings.Contains(out, "CANONICAL") {
		t.Fatalf("no signing log:\n%s", out)
	}
	for _, secret := range []string{"AKIDFAKEKEY12345", "fake-secret-value", "session-token-secret", "Signature="} {
		if strings.Contains(out, secret) {
			t.Errorf("debug output contains %q:\n%s", secret, out)
		}
	}
}

func TestReadManifestBound_2_7(t *testing.T) {
	f := &fakeS3{getBody: bytes.Repeat([]byte("x"), prune.MaxManifestSize+1)}
	s := newFake(t, f, false, nil, "")
	if _, err := s.ReadManifest(context.Background(), "m.json", ""); err == nil || !strings.Contains(err.Error(), "larger") {
		t.Fatalf("err %v", err)
	}
	f.getBody = []byte("{}")
	if b, err := s.ReadManifest(context.Background(), "m.json", ""); err != nil || string(b) != "{}" {
		t.Fatalf("%q %v", b, err)
	}
}

func TestConfigHelpers_9_1_10_9(t *testing.T) {
	for _, ep := range []string{"s3.example.com", "/path", "ftp://h", "http://"} {
		if ValidateEndpoint(ep) == nil {
			t.Errorf("endpoint %q accepted", ep)
		}
	}
	if err := ValidateEndpoint("https://user:pw-secret@h/path?token=q-secret"); err != nil || strings.Contains(fmt.Sprint(err), "secret") {
		t.Fatal(err)
	}
	tests := map[string]string{
		RedactEndpoint("https://user:pw-secret@h/path?token=q-secret#frag"): "https://h/path",
		RedactEndpoint(""):                  "<sdk-default>",
		RedactEndpoint("::"):                "<invalid>",
		Mask("ACCESSKEY1234"):               "ACCE...1234",
		Mask("short"):                       "*****",
		Mask(""):                            "<empty>",
		Fingerprint(""):                     "<empty>",
		fmt.Sprint(len(Fingerprint("abc"))): "12",
	}
	for got, want := range tests {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
	if _, err := New(Config{Bucket: "b", CAFile: "/nonexistent/ca.pem"}); err == nil {
		t.Fatal("a missing CA file must fail")
	}
}

// Some servers repeat the marker version at the top of the next page; the
// adapter must not list that identity twice.
func TestVersionPagesSkipRepeatedMarker(t *testing.T) {
	f := &fakeS3{pages: []string{
		`<ListVersionsResult><IsTruncated>true</IsTruncated><NextKeyMarker>r/a</NextKeyMarker><NextVersionIdMarker>2</NextVersionIdMarker>
<Version><Key>r/a</Key><VersionId>1</VersionId><Size>1</Size><ETag>"e"</ETag></Version>
<Version><Key>r/a</Key><VersionId>2</VersionId><Size>1</Size><ETag>"e"</ETag></Version></ListVersionsResult>`,
		`<ListVersionsResult><IsTruncated>false</IsTruncated>
<Version><Key>r/a</Key><VersionId>2</VersionId><Size>1</Size><ETag>"e"</ETag></Version>
<DeleteMarker><Key>r/b</Key><VersionId>3</VersionId><IsLatest>true</IsLatest></DeleteMarker></ListVersionsResult>`,
	}}
	s := newFake(t, f, false, nil, "")
	vs, err := s.ListAll(context.Background(), "r", true)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 3 || !vs[2].DeleteMarker || vs[2].Size != 0 {
		t.Fatalf("versions %+v", vs)
	}
	if q := f.requests()[1].query; !strings.Contains(q, "key-marker=r%2Fa") || !strings.Contains(q, "version-id-marker=2") {
		t.Fatalf("second page query %s", q)
	}
}
