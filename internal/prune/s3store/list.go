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
	var objs []prune.Object
	var prefixes []string
	err := s.pages(ctx, p, "/", versions, func(page []prune.Object, cps []string) error {
		objs = append(objs, keepInside(p, page)...)
		prefixes = append(prefixes, cps...)
		return nil
	})
	if err != nil {
		return nil, nil, err
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
	return objs, dirs, nil
}

// ListAll lists every object below "p/" recursively.
func (s *Store) ListAll(ctx context.Context, p string, versions bool) ([]prune.Object, error) {
	var objs []prune.Object
	err := s.WalkAll(ctx, p, versions, func(page []prune.Object) error {
		objs = append(objs, page...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return objs, nil
}

// WalkAll is ListAll a page at a time: fn gets each page's objects in
// listing (key) order as it arrives, so a caller need not hold them all.
// An error from fn ends the listing and is returned as is.
func (s *Store) WalkAll(ctx context.Context, p string, versions bool, fn func([]prune.Object) error) error {
	return s.pages(ctx, p, "", versions, func(page []prune.Object, _ []string) error {
		return fn(keepInside(p, page))
	})
}

// keepInside filters a page in place to the keys inside p.
func keepInside(p string, objs []prune.Object) []prune.Object {
	kept := objs[:0]
	for _, o := range objs {
		if inside(p, o.Key) {
			kept = append(kept, o)
		}
	}
	return kept
}

// pages runs one listing, handing each page's objects and common prefixes
// to page. A listing error is wrapped with the place; page's error is
// returned as is.
func (s *Store) pages(ctx context.Context, p, delim string, versions bool, page func([]prune.Object, []string) error) error {
	list := s.listCurrent
	if versions {
		list = s.listVersions
	}
	var pageErr error
	err := list(ctx, p, delim, func(objs []prune.Object, cps []string) bool {
		pageErr = page(objs, cps)
		return pageErr == nil
	})
	switch {
	case pageErr != nil:
		return pageErr
	case err != nil:
		where := p
		if where == "" {
			where = "the bucket top level"
		}
		return fmt.Errorf("list %s in bucket %s: %w", where, s.bucket, err)
	}
	return nil
}

func (s *Store) maxKeysPtr() *int32 {
	if s.maxKeys <= 0 {
		return nil
	}
	return aws.Int32(s.maxKeys)
}

// pageFunc takes one page; false stops the listing.
type pageFunc func(objs []prune.Object, prefixes []string) bool

func (s *Store) listCurrent(ctx context.Context, p, delim string, page pageFunc) error {
	in := &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), Prefix: aws.String(listPrefix(p)), MaxKeys: s.maxKeysPtr()}
	if delim != "" {
		in.Delimiter = aws.String(delim)
	}
	for {
		pageCtx, gens := withGenerations(ctx, s.gcs)
		out, err := s.cli.ListObjectsV2(pageCtx, in)
		s.n.listPages.Add(1)
		if err != nil {
			return err
		}
		objs := make([]prune.Object, 0, len(out.Contents))
		for _, o := range out.Contents {
			key := aws.ToString(o.Key)
			obj := prune.Object{Key: key, Size: aws.ToInt64(o.Size), ETag: aws.ToString(o.ETag), LastModified: aws.ToTime(o.LastModified)}
			if gens != nil {
				obj.Generation = gens.take(key)
			}
			objs = append(objs, obj)
		}
		if !page(objs, commonPrefixes(out.CommonPrefixes)) {
			return nil
		}
		if !aws.ToBool(out.IsTruncated) {
			return nil
		}
		if aws.ToString(out.NextContinuationToken) == "" {
			return errors.New("truncated listing without a continuation token")
		}
		in.ContinuationToken = out.NextContinuationToken
	}
}

func commonPrefixes(cps []types.CommonPrefix) []string {
	out := make([]string, 0, len(cps))
	for _, cp := range cps {
		out = append(out, aws.ToString(cp.Prefix))
	}
	return out
}

func (s *Store) listVersions(ctx context.Context, p, delim string, page pageFunc) error {
	in := &s3.ListObjectVersionsInput{Bucket: aws.String(s.bucket), Prefix: aws.String(listPrefix(p)), MaxKeys: s.maxKeysPtr()}
	if delim != "" {
		in.Delimiter = aws.String(delim)
	}
	for {
		out, err := s.cli.ListObjectVersions(ctx, in)
		s.n.versionPages.Add(1)
		if err != nil {
			return err
		}
		all := versionObjects(out.Versions, out.DeleteMarkers)
		objs := all[:0]
		for _, o := range all {
			// S3 resumes after the marker version; some compatible servers
			// (versitygw) repeat it on the next page, which would list one
			// identity twice and fail every snapshot comparison.
			if in.KeyMarker != nil && o.Key == aws.ToString(in.KeyMarker) && o.VersionID == aws.ToString(in.VersionIdMarker) {
				continue
			}
			objs = append(objs, o)
		}
		if !page(objs, commonPrefixes(out.CommonPrefixes)) {
			return nil
		}
		if !aws.ToBool(out.IsTruncated) {
			return nil
		}
		if out.NextKeyMarker == nil && out.NextVersionIdMarker == nil {
			return errors.New("truncated version listing without a next marker")
		}
		in.KeyMarker, in.VersionIdMarker = out.NextKeyMarker, out.NextVersionIdMarker
	}
}

// versionObjects turns one page into snapshot objects: every version, and
// every delete marker with size 0.
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

// ReadManifest reads one manifest object, at most MaxManifestSize bytes:
// a larger body is an error, so the candidate becomes
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

// HeadManifest HEADs the current version of a manifest: the identity the
// executor compares with the plan right before each delete (spec 5.11,
// 6.5). GCS reports an object's generation as its VersionId.
func (s *Store) HeadManifest(ctx context.Context, key string) (prune.Object, error) {
	out, err := s.cli.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	s.n.heads.Add(1)
	if err != nil {
		return prune.Object{}, fmt.Errorf("head manifest %s: %w", key, err)
	}
	return prune.Object{Key: key, Size: aws.ToInt64(out.ContentLength), ETag: aws.ToString(out.ETag),
		LastModified: aws.ToTime(out.LastModified), VersionID: aws.ToString(out.VersionId), IsLatest: true}, nil
}

// BucketVersioning returns the raw GetBucketVersioning status ("" when the
// bucket was never versioned); the planner maps it (prune.ResolveVersioning).
func (s *Store) BucketVersioning(ctx context.Context) (string, error) {
	out, err := s.cli.GetBucketVersioning(ctx, &s3.GetBucketVersioningInput{Bucket: aws.String(s.bucket)})
	s.n.versioning.Add(1)
	if err != nil {
		return "", fmt.Errorf("get bucket versioning of %s (or pass --bucket-versioning explicitly): %w", s.bucket, err)
	}
	return string(out.Status), nil
}
