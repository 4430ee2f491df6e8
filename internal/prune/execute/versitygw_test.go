package execute

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/snapflow/snapflow/internal/prune"
	"github.com/snapflow/snapflow/internal/prune/s3store"
	"github.com/snapflow/snapflow/test/harness"
)

// TestVersitygwPrune runs plan and prune against a real S3 server: an
// unversioned bucket, and a versioned one where an object overwritten
// after the final snapshot survives with its new version.
func TestVersitygwPrune(t *testing.T) {
	harness.RequireTool(t, "versitygw")
	gw, err := harness.StartS3(harness.S3Options{Versioning: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gw.Stop() })
	ctx := context.Background()
	raw := s3.New(s3.Options{Region: gw.Region, BaseEndpoint: aws.String(gw.URL), UsePathStyle: true,
		Credentials: s3store.Static(gw.AccessKey, gw.SecretKey, "")})
	// Objects are seconds old; a plan time an hour ahead with a one-minute
	// min-age makes them old without touching the server's clock.
	later := time.Now().Add(time.Hour)
	seed := func(bucket string, versioned bool) {
		if _, err := raw.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
			t.Fatal(err)
		}
		if versioned {
			if _, err := raw.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String(bucket),
				VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}}); err != nil {
				t.Fatal(err)
			}
		}
		manifest, _ := json.Marshal(map[string]any{
			"apiVersion": prune.ManifestAPIVersion, "kind": "Backup",
			"metadata": map[string]any{"name": "b1", "namespace": "app", "uid": "uid-b1", "creationTimestamp": "2026-01-01T00:00:00Z"},
			"spec":     map[string]any{"deletionPolicy": "Delete"},
			"status":   map[string]any{"path": "/app/" + C + "/pg/b1", "backupRepoName": "repo"},
		})
		objs := map[string]string{b1 + "/" + prune.DefaultManifestName: string(manifest), b1 + "/data": "data", O + "/x": "x", U + "/x": "user"}
		if versioned {
			objs[b1+"/"+prune.DefaultManifestName+"#2"] = string(manifest)
		}
		for _, k := range []string{b1 + "/" + prune.DefaultManifestName, b1 + "/data", O + "/x", U + "/x", b1 + "/" + prune.DefaultManifestName + "#2"} {
			body, ok := objs[k]
			if !ok {
				continue
			}
			key, _, _ := strings.Cut(k, "#")
			if _, err := raw.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(body)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	store := func(bucket string) *s3store.Store {
		s, err := s3store.New(s3store.Config{Bucket: bucket, Endpoint: gw.URL, PathStyle: true, Region: gw.Region,
			Credentials: s3store.Static(gw.AccessKey, gw.SecretKey, ""), MaxKeys: 2})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	versions := func(bucket string) []string {
		out, err := raw.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(bucket)})
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, v := range out.Versions {
			keys = append(keys, aws.ToString(v.Key))
		}
		for _, d := range out.DeleteMarkers {
			keys = append(keys, aws.ToString(d.Key)+"(marker)")
		}
		slices.Sort(keys)
		return keys
	}

	t.Run("unversioned", func(t *testing.T) {
		seed("plain", false)
		st, cl := store("plain"), newCluster()
		cl.in.Repo.Config["bucket"], cl.in.StorageClass.Parameters["bucket"] = "plain", "plain"
		cl.in.PVs[0].VolumeHandle = "plain/" + R
		inv := cl.inventory()
		opts := prune.Options{MinAge: time.Minute, Versioning: prune.VersioningDisabled, VersioningSource: prune.SourceOperatorOverride}
		pl, err := BuildPlan(ctx, st, PlanInput{Inventory: inv, Options: opts, Now: later})
		if err != nil {
			t.Fatal(err)
		}
		if pl.DeleteObjects != 3 || pl.Blocked() {
			t.Fatalf("plan deletes %d, blockers %v", pl.DeleteObjects, pl.BlockingReasons)
		}
		_, ex, err := Run(ctx, pl, inv, Config{Store: st, Inventory: cl, Concurrency: 2, Now: func() time.Time { return later }})
		if err != nil {
			t.Fatalf("%v %+v", err, ex)
		}
		if got := versions("plain"); !slices.Equal(got, []string{U + "/x"}) {
			t.Fatalf("left %v", got)
		}
		if s := st.Stats(); s.DeleteRequests != 3 || s.ManifestGets != 1 || s.VersioningQueries != 0 {
			t.Fatalf("stats %+v", s)
		}
	})

	// A manifest rewritten after every re-check, at the last moment before
	// a delete: the HEAD right before the next batch sees it, so the
	// backup's manifest (and what it now describes) stays.
	t.Run("manifest rewritten before the last delete", func(t *testing.T) {
		seed("late", false)
		st, cl := store("late"), newCluster()
		cl.in.Repo.Config["bucket"], cl.in.StorageClass.Parameters["bucket"] = "late", "late"
		cl.in.PVs[0].VolumeHandle = "late/" + R
		inv := cl.inventory()
		opts := prune.Options{MinAge: time.Minute, Versioning: prune.VersioningDisabled, VersioningSource: prune.SourceOperatorOverride}
		pl, err := BuildPlan(ctx, st, PlanInput{Inventory: inv, Options: opts, Now: later})
		if err != nil {
			t.Fatal(err)
		}
		rewrote := false
		late := &lateStore{Store: st, before: func(batch []prune.DeleteTarget) {
			if !rewrote && slices.ContainsFunc(batch, func(d prune.DeleteTarget) bool { return d.Key == b1+"/data" }) {
				rewrote = true
				if _, err := raw.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("late"), Key: aws.String(b1 + "/" + prune.DefaultManifestName),
					Body: strings.NewReader(`{"rewritten":true}`)}); err != nil {
					t.Error(err)
				}
			}
		}}
		_, ex, err := Run(ctx, pl, inv, Config{Store: late, Inventory: cl, Concurrency: 1, Now: func() time.Time { return later }})
		if !rewrote || err == nil || resultFor(ex, b1) == nil || !strings.Contains(resultFor(ex, b1).Error, "manifest changed") {
			t.Fatalf("rewrote %v, err %v, results %+v", rewrote, err, ex)
		}
		if got := versions("late"); !slices.Equal(got, []string{b1 + "/" + prune.DefaultManifestName, U + "/x"}) {
			t.Fatalf("left %v, want the user volume and the rewritten manifest", got)
		}
		if s := st.Stats(); s.ManifestHeads < 2 {
			t.Fatalf("stats %+v: want a HEAD before the re-listing and before each delete", s)
		}
	})

	t.Run("versioned overwrite survives", func(t *testing.T) {
		seed("vers", true)
		st, cl := store("vers"), newCluster()
		cl.in.Repo.Config["bucket"], cl.in.StorageClass.Parameters["bucket"] = "vers", "vers"
		cl.in.PVs[0].VolumeHandle = "vers/" + R
		inv := cl.inventory()
		detected, err := st.BucketVersioning(ctx)
		if err != nil {
			t.Fatal(err)
		}
		state, source, err := prune.ResolveVersioning(prune.ModeAuto, detected)
		if err != nil || state != prune.VersioningEnabled {
			t.Fatalf("%s %v", state, err)
		}
		opts := prune.Options{MinAge: time.Minute, Versioning: state, VersioningSource: source, PurgeVersions: true}
		pl, err := BuildPlan(ctx, st, PlanInput{Inventory: inv, Options: opts, Now: later})
		if err != nil {
			t.Fatal(err)
		}
		if c := pl.Candidates[find(pl, prune.TypeBackup, b1)]; c.State != prune.StateOrphan || c.ObjectCount != 3 {
			t.Fatalf("b1 %+v", c)
		}
		// O is overwritten after the final snapshot, while its own scope is
		// re-listed: the new version is in no snapshot, so O must fail and
		// keep every version, while b1 goes with all of its versions.
		overwritten := false
		raced := &racingStore{Store: st, before: func(call string) {
			if call == "all:"+O && !overwritten && cl.refreshes > 0 {
				overwritten = true
				if _, err := raw.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("vers"), Key: aws.String(O + "/x"), Body: strings.NewReader("newer")}); err != nil {
					t.Error(err)
				}
			}
		}}
		_, ex, err := Run(ctx, pl, inv, Config{Store: raced, Inventory: cl, Concurrency: 1, Now: func() time.Time { return later }})
		if err == nil || resultFor(ex, O) == nil || !strings.Contains(resultFor(ex, O).Error, "objects changed") {
			t.Fatalf("err %v %+v", err, ex)
		}
		if got := versions("vers"); !slices.Equal(got, []string{U + "/x", O + "/x", O + "/x"}) {
			t.Fatalf("left %v", got)
		}
	})
}

// lateStore runs a hook before each delete request is sent.
type lateStore struct {
	*s3store.Store
	before func(batch []prune.DeleteTarget)
}

func (l *lateStore) DeleteObjects(ctx context.Context, batch []prune.DeleteTarget) ([]prune.DeleteTarget, []prune.DeleteFailure, error) {
	l.before(batch)
	return l.Store.DeleteObjects(ctx, batch)
}

// racingStore runs a hook before each recursive listing.
type racingStore struct {
	*s3store.Store
	before func(call string)
}

func (r *racingStore) ListAll(ctx context.Context, p string, versions bool) ([]prune.Object, error) {
	r.before("all:" + p)
	return r.Store.ListAll(ctx, p, versions)
}
