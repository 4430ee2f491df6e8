package s3store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/snapflow/snapflow/internal/prune"
)

// listPrefix is the S3 Prefix for a normalised key prefix: "p/" so that the
// server already cuts at a segment boundary, or "" for the bucket top.
func listPrefix(p string) string {
	if p == "" {
		return ""
	}
	return p + "/"
}

// inside keeps what the planner's whole-segment Contains accepts: S3
// matches prefixes character by character, and a key such as "p/../q"
// normalises out of p.
func inside(p, key string) bool {
	k, ok := prune.NormalizeKey(key)
	return ok && prune.Contains(p, k)
}

// ListLevel is a delimiter listing of "p/" (p normalised, "" for the bucket
// top): the objects at that level and the names of its subdirectories,
// merged over every page, de-duplicated and sorted. versions lists every
// version and delete marker instead of the current objects.
func (s *Store) ListLevel(ctx context.Context, p string, versions bool) ([]prune.Object, []string, error) {
	return s.list(ctx, p, "/", versions)
}

// ListAll lists every object below "p/" recursively.
func (s *Store) ListAll(ctx context.Context, p string, versions bool) ([]prune.Object, error) {
	objs, _, err := s.list(ctx, p, "", versions)
	return objs, err
}

func (s *Store) list(ctx context.Context, p, delim string, versions bool) ([]prune.Object, []string, error) {
	var objs []prune.Object
	var prefixes []string
	var err error
	if versions {
		objs, prefixes, err = s.listVersions(ctx, p, delim)
	} else {
		objs, prefixes, err = s.listCurrent(ctx, p, delim)
	}
	if err != nil {
		where := p
		if where == "" {
			where = "the bucket top level"
		}
		return nil, nil, fmt.Errorf("list %s in bucket %s: %w", where, s.bucket, err)
	}
	kept := objs[:0]
	for _, o := range objs {
		if inside(p, o.Key) {
			kept = append(kept, o)
		}
	}
	seen := map[string]bool{}
	var dirs []string
	lp := listPrefix(p)
	for _, cp := range prefixes {
		name := strings.TrimSuffix(strings.TrimPrefix(cp, lp), "/")
		if !strings.HasPrefix(cp, lp) || name == "" || strings.Contains(name, "/") || seen[name] {
			continue
		}
		seen[name] = true
		dirs = append(dirs, name)
	}
	sort.Strings(dirs)
	return kept, dirs, nil
}

func (s *Store) maxKeysPtr() *int32 {
	if s.maxKeys <= 0 {
		return nil
	}
	return aws.Int32(s.maxKeys)
}

func (s *Store) listCurrent(ctx context.Context, p, delim string) ([]prune.Object, []string, error) {
	in := &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), Prefix: aws.String(listPrefix(p)), MaxKeys: s.maxKeysPtr()}
	if delim != "" {
		in.Delimiter = aws.String(delim)
	}
	var objs []prune.Object
	var prefixes []string
	for {
		pageCtx, gens := withGenerations(ctx, s.gcs)
		out, err := s.cli.ListObjectsV2(pageCtx, in)
		s.n.listPages.Add(1)
		if err != nil {
			return nil, nil, err
		}
		for _, o := range out.Contents {
			key := aws.ToString(o.Key)
			obj := prune.Object{Key: key, Size: aws.ToInt64(o.Size), ETag: aws.ToString(o.ETag), LastModified: aws.ToTime(o.LastModified)}
			if gens != nil {
				obj.Generation = gens.take(key)
			}
			objs = append(objs, obj)
		}
		for _, cp := range out.CommonPrefixes {
			prefixes = append(prefixes, aws.ToString(cp.Prefix))
		}
		if !aws.ToBool(out.IsTruncated) {
			return objs, prefixes, nil
		}
		if aws.ToString(out.NextContinuationToken) == "" {
			return nil, nil, errors.New("truncated listing without a continuation token")
		}
		in.ContinuationToken = out.NextContinuationToken
	}
}

func (s *Store) listVersions(ctx context.Context, p, delim string) ([]prune.Object, []string, error) {
	in := &s3.ListObjectVersionsInput{Bucket: aws.String(s.bucket), Prefix: aws.String(listPrefix(p)), MaxKeys: s.maxKeysPtr()}
	if delim != "" {
		in.Delimiter = aws.String(delim)
	}
	var objs []prune.Object
	var prefixes []string
	for {
		out, err := s.cli.ListObjectVersions(ctx, in)
		s.n.versionPages.Add(1)
		if err != nil {
			return nil, nil, err
		}
		for _, o := range versionObjects(out.Versions, out.DeleteMarkers) {
			// S3 resumes after the marker version; some compatible servers
			// (versitygw) repeat it on the next page, which would list one
			// identity twice and fail every snapshot comparison.
			if in.KeyMarker != nil && o.Key == aws.ToString(in.KeyMarker) && o.VersionID == aws.ToString(in.VersionIdMarker) {
				continue
			}
			objs = append(objs, o)
		}
		for _, cp := range out.CommonPrefixes {
			prefixes = append(prefixes, aws.ToString(cp.Prefix))
		}
		if !aws.ToBool(out.IsTruncated) {
			return objs, prefixes, nil
		}
		if out.NextKeyMarker == nil && out.NextVersionIdMarker == nil {
			return nil, nil, errors.New("truncated version listing without a next marker")
		}
		in.KeyMarker, in.VersionIdMarker = out.NextKeyMarker, out.NextVersionIdMarker
	}
}

// versionObjects turns one page into snapshot objects: every version, and
// every delete marker with size 0 (6.2).
func versionObjects(vs []types.ObjectVersion, dms []types.DeleteMarkerEntry) []prune.Object {
	out := make([]prune.Object, 0, len(vs)+len(dms))
	for _, v := range vs {
		out = append(out, prune.Object{Key: aws.ToString(v.Key), Size: aws.ToInt64(v.Size), ETag: aws.ToString(v.ETag),
			LastModified: aws.ToTime(v.LastModified), VersionID: aws.ToString(v.VersionId), IsLatest: aws.ToBool(v.IsLatest)})
	}
	for _, d := range dms {
		out = append(out, prune.Object{Key: aws.ToString(d.Key), LastModified: aws.ToTime(d.LastModified),
			VersionID: aws.ToString(d.VersionId), IsLatest: aws.ToBool(d.IsLatest), DeleteMarker: true})
	}
	return out
}

// ReadManifest reads one manifest object, at most MaxManifestSize bytes
// (2.7): a larger body is an error, so the candidate becomes
// invalid-manifest without the tool buffering it. versionID pins the
// version the listing saw ("" for the current object).
func (s *Store) ReadManifest(ctx context.Context, key, versionID string) ([]byte, error) {
	in := &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)}
	if versionID != "" && versionID != "null" {
		in.VersionId = aws.String(versionID)
	}
	out, err := s.cli.GetObject(ctx, in)
	s.n.gets.Add(1)
	if err != nil {
		return nil, fmt.Errorf("read manifest %s: %w", key, err)
	}
	defer out.Body.Close()
	data, err := io.ReadAll(io.LimitReader(out.Body, prune.MaxManifestSize+1))
	if err != nil {
		return nil, fmt.Errorf("read manifest %s: %w", key, err)
	}
	if len(data) > prune.MaxManifestSize {
		return nil, fmt.Errorf("manifest %s is larger than %d bytes", key, prune.MaxManifestSize)
	}
	return data, nil
}

// BucketVersioning returns the raw GetBucketVersioning status ("" when the
// bucket was never versioned); the planner maps it (6.1).
func (s *Store) BucketVersioning(ctx context.Context) (string, error) {
	out, err := s.cli.GetBucketVersioning(ctx, &s3.GetBucketVersioningInput{Bucket: aws.String(s.bucket)})
	s.n.versioning.Add(1)
	if err != nil {
		return "", fmt.Errorf("get bucket versioning of %s (or pass --bucket-versioning explicitly): %w", s.bucket, err)
	}
	return string(out.Status), nil
}
