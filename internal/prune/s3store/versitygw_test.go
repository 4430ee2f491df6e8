package s3store

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/snapflow/snapflow/internal/prune"
	"github.com/snapflow/snapflow/test/harness"
)

// TestVersitygw runs the adapter against a real S3 server, with bucket
// versioning off and on: paginated delimiter and recursive listings,
// version listings with delete markers, the versioning query, and
// DeleteObjects with Content-MD5 by key and by VersionId.
func TestVersitygw(t *testing.T) {
	harness.RequireTool(t, "versitygw")
	gw, err := harness.StartS3(harness.S3Options{Versioning: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gw.Stop() })
	ctx := context.Background()
	raw := s3.New(s3.Options{Region: gw.Region, BaseEndpoint: aws.String(gw.URL), UsePathStyle: true,
		Credentials: Static(gw.AccessKey, gw.SecretKey, "")})
	put := func(bucket, key, body string) string {
		t.Helper()
		out, err := raw.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(body)})
		if err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
		return aws.ToString(out.VersionId)
	}
	store := func(bucket string) *Store {
		s, err := New(Config{Bucket: bucket, Endpoint: gw.URL, PathStyle: true, Region: gw.Region,
			Credentials: Static(gw.AccessKey, gw.SecretKey, ""), MaxKeys: 2})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	keys := []string{"r/a", "r/b", "r/c/d", "r/c/e", "r/f/g", "rx/h", "top"}

	t.Run("unversioned", func(t *testing.T) {
		mkBucket(t, raw, "plain", false)
		for _, k := range keys {
			put("plain", k, "data-"+k)
		}
		s := store("plain")
		if st, err := s.BucketVersioning(ctx); err != nil || st != "" && st != "Suspended" {
			t.Fatalf("versioning %q %v", st, err)
		}
		objs, dirs, err := s.ListLevel(ctx, "", false)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(dirs, ",") != "r,rx" || len(objs) != 1 || objs[0].Key != "top" {
			t.Fatalf("top level: %v %v", dirs, keysOf(objs))
		}
		objs, dirs, err = s.ListLevel(ctx, "r", false)
		if err != nil || strings.Join(dirs, ",") != "c,f" || strings.Join(keysOf(objs), ",") != "r/a,r/b" {
			t.Fatalf("level r: %v %v %v", dirs, keysOf(objs), err)
		}
		all, err := s.ListAll(ctx, "r", false)
		if err != nil || strings.Join(keysOf(all), ",") != "r/a,r/b,r/c/d,r/c/e,r/f/g" {
			t.Fatalf("all r (rx must be filtered out): %v %v", keysOf(all), err)
		}
		for _, o := range all {
			if o.ETag == "" || o.LastModified.IsZero() || o.Size == 0 {
				t.Fatalf("incomplete object %+v", o)
			}
		}
		if st := s.Stats(); st.ListPages < 5 {
			t.Fatalf("MaxKeys=2 should paginate: %+v", st)
		}
		body, err := s.ReadManifest(ctx, "r/a", "")
		if err != nil || string(body) != "data-r/a" {
			t.Fatalf("%q %v", body, err)
		}
		c := prune.Candidate{Type: prune.TypeOrphanVolumeRoot, Objects: all[:3]}
		batches, err := prune.DeleteBatches(c, prune.DeleteIdentity{}, "")
		if err != nil {
			t.Fatal(err)
		}
		del, failed, err := s.DeleteObjects(ctx, batches[0])
		if err != nil || len(failed) != 0 {
			t.Fatalf("delete: %v %v", failed, err)
		}
		if n, _, err := prune.TallyBatch(batches[0], del, failed); n != 3 || err != nil {
			t.Fatalf("tally %d %v", n, err)
		}
		left, _ := s.ListAll(ctx, "", false)
		if strings.Join(keysOf(left), ",") != "r/c/e,r/f/g,rx/h,top" {
			t.Fatalf("left %v", keysOf(left))
		}
	})

	t.Run("versioned", func(t *testing.T) {
		mkBucket(t, raw, "vers", true)
		v1 := put("vers", "r/m", "one")
		v2 := put("vers", "r/m", "two")
		put("vers", "r/n", "n")
		if _, err := raw.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("vers"), Key: aws.String("r/n")}); err != nil {
			t.Fatal(err)
		}
		put("vers", "q/keep", "k")
		s := store("vers")
		if st, err := s.BucketVersioning(ctx); err != nil || st != "Enabled" {
			t.Fatalf("versioning %q %v", st, err)
		}
		vs, err := s.ListAll(ctx, "r", true)
		if err != nil {
			t.Fatal(err)
		}
		var markers, latest int
		ids := map[string]bool{}
		for _, o := range vs {
			ids[o.VersionID] = true
			if o.DeleteMarker {
				markers++
			}
			if o.IsLatest {
				latest++
			}
		}
		if len(vs) != 4 || markers != 1 || latest != 2 || !ids[v1] || !ids[v2] {
			t.Fatalf("versions %+v", vs)
		}
		_, dirs, err := s.ListLevel(ctx, "", true)
		if err != nil || strings.Join(dirs, ",") != "q,r" {
			t.Fatalf("version dirs %v %v", dirs, err)
		}
		if body, err := s.ReadManifest(ctx, "r/m", v1); err != nil || string(body) != "one" {
			t.Fatalf("pinned read %q %v", body, err)
		}
		c := prune.Candidate{Type: prune.TypeOrphanVolumeRoot, Objects: vs}
		batches, err := prune.DeleteBatches(c, prune.DeleteIdentity{Versioned: true}, "")
		if err != nil {
			t.Fatal(err)
		}
		del, failed, err := s.DeleteObjects(ctx, batches[0])
		if err != nil || len(failed) != 0 {
			t.Fatalf("delete: %+v %v", failed, err)
		}
		if n, _, err := prune.TallyBatch(batches[0], del, failed); n != 4 || err != nil {
			t.Fatalf("tally %d %v", n, err)
		}
		left, err := s.ListAll(ctx, "", true)
		if err != nil || strings.Join(keysOf(left), ",") != "q/keep" {
			t.Fatalf("every version of r must be gone: %v %v", keysOf(left), err)
		}
	})
}

func mkBucket(t *testing.T, cli *s3.Client, name string, versioned bool) {
	t.Helper()
	ctx := context.Background()
	if _, err := cli.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatal(err)
	}
	if versioned {
		if _, err := cli.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String(name),
			VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}}); err != nil {
			t.Fatal(fmt.Errorf("enable versioning: %w", err))
		}
	}
}

func keysOf(os []prune.Object) []string {
	out := make([]string, len(os))
	for i, o := range os {
		out[i] = o.Key
	}
	sort.Strings(out)
	return out
}
