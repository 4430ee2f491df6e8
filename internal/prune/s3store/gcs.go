package s3store

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"

	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// IsGCSEndpoint reports whether an endpoint is the Cloud Storage XML API:
// the host, lower-cased and without a trailing dot, has at least 3
// labels, ends in googleapis.com, and some label before "googleapis", split
// on "-", contains the token "storage".
func IsGCSEndpoint(endpoint string) bool {
	endpoint = strings.TrimSpace(endpoint)
	if endpoint == "" {
		return false
	}
	host := endpoint
	if strings.Contains(endpoint, "://") {
		u, err := url.Parse(endpoint)
		if err != nil {
			return false
		}
		host = u.Hostname()
	} else if i := strings.IndexAny(host, "/:"); i >= 0 {
		host = host[:i]
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	labels := strings.Split(host, ".")
	n := len(labels)
	if n < 3 || labels[n-2] != "googleapis" || labels[n-1] != "com" {
		return false
	}
	for _, l := range labels[:n-2] {
		for _, tok := range strings.Split(l, "-") {
			if tok == "storage" {
				return true
			}
		}
	}
	return false
}

// Headers that Cloud Storage's SigV4 canonicalisation rejects when signed.
var gcsUnsignedHeaders = []string{"Accept-Encoding", "Amz-Sdk-Invocation-Id", "Amz-Sdk-Request"}

// gcsInteropHeader makes version listings report generations.
const gcsInteropHeader = "x-goog-interop-list-objects-format"

// gcsSigningCompat is applied to every operation against Cloud Storage.
func gcsSigningCompat(stack *middleware.Stack) error {
	if err := stack.Finalize.Insert(gcsBeforeSign{}, "Signing", middleware.Before); err != nil {
		return err
	}
	if err := stack.Finalize.Insert(gcsAfterSign{}, "Signing", middleware.After); err != nil {
		return err
	}
	return stack.Deserialize.Insert(&generationCapture{}, "OperationDeserializer", middleware.After)
}

type gcsBeforeSign struct{}

func (gcsBeforeSign) ID() string { return "SnapflowGCSBeforeSign" }

func (gcsBeforeSign) HandleFinalize(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
	if req, ok := in.Request.(*smithyhttp.Request); ok {
		for _, h := range gcsUnsignedHeaders {
			req.Header.Del(h)
		}
		if _, ok := req.URL.Query()["versions"]; ok {
			req.Header.Set(gcsInteropHeader, "enabled")
		}
	}
	return next.HandleFinalize(ctx, in)
}

type gcsAfterSign struct{}

func (gcsAfterSign) ID() string { return "SnapflowGCSAfterSign" }

func (gcsAfterSign) HandleFinalize(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
	if req, ok := in.Request.(*smithyhttp.Request); ok {
		// Unsigned, and it keeps Go's transport from asking for gzip.
		req.Header.Set("Accept-Encoding", "identity")
	}
	return next.HandleFinalize(ctx, in)
}

// generations collects the <Generation> of each key in one plain listing
// page; the SDK's ListObjectsV2 output has no such field.
type generations struct {
	mu  sync.Mutex
	gen map[string]string
}

func (g *generations) take(key string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.gen[key]
}

type generationsKey struct{}

// withGenerations attaches a collector for one list request on GCS.
func withGenerations(ctx context.Context, gcs bool) (context.Context, *generations) {
	if !gcs {
		return ctx, nil
	}
	g := &generations{gen: map[string]string{}}
	return context.WithValue(ctx, generationsKey{}, g), g
}

// generationCapture reads the raw list body before the SDK decodes it and
// puts the body back untouched.
type generationCapture struct{}

func (*generationCapture) ID() string { return "SnapflowGCSGenerationCapture" }

func (*generationCapture) HandleDeserialize(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
	out, md, err := next.HandleDeserialize(ctx, in)
	g, _ := ctx.Value(generationsKey{}).(*generations)
	resp, ok := out.RawResponse.(*smithyhttp.Response)
	if err != nil || g == nil || !ok || resp.StatusCode != 200 {
		return out, md, err
	}
	body, rerr := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if rerr != nil {
		return out, md, fmt.Errorf("read list response: %w", rerr)
	}
	var doc struct {
		Contents []struct {
			Key        string `xml:"Key"`
			Generation string `xml:"Generation"`
		} `xml:"Contents"`
	}
	if xerr := xml.Unmarshal(body, &doc); xerr != nil {
		// Leave decoding errors to the SDK's own deserializer.
		return out, md, nil
	}
	g.mu.Lock()
	for _, c := range doc.Contents {
		if c.Generation != "" {
			g.gen[c.Key] = c.Generation
		}
	}
	g.mu.Unlock()
	return out, md, nil
}
