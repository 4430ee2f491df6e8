package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// The harness installs the CRDs of the systems snapflow integrates with, so
// their objects can be stored and dry-run applied next to ours.
func TestExternalCRDsInstalled(t *testing.T) {
	out := kubectl(t, nil, 0, "api-resources", "-o", "name").Stdout
	for _, res := range []string{
		"backups.dataprotection.kubeblocks.io", "backuprepos.dataprotection.kubeblocks.io", "restores.dataprotection.kubeblocks.io",
		"backups.velero.io", "schedules.velero.io",
		"volumesnapshots.snapshot.storage.k8s.io", "volumesnapshotclasses.snapshot.storage.k8s.io",
		"services.serving.knative.dev", "triggers.eventing.knative.dev", "apiserversources.sources.knative.dev", "pingsources.sources.knative.dev",
		"snapshotpolicies.kopiur.home-operations.com", "clusterrepositories.kopiur.home-operations.com",
	} {
		if !strings.Contains(out, res+"\n") {
			t.Errorf("api-resources misses %s", res)
		}
	}
	kubectl(t, []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"external"}}`), 0, "apply", "-f", "-")
	kubectl(t, []byte(`apiVersion: sources.knative.dev/v1
kind: PingSource
metadata: {name: tick, namespace: external}
spec:
  schedule: "* * * * *"
  sink: {uri: "http://snapflow-schedule.snapflow-system.svc"}
`), 0, "apply", "--dry-run=server", "-f", "-")
	kubectl(t, []byte(`apiVersion: v1
kind: ConfigMap
metadata: {name: policies, namespace: external}
data: {policies.yaml: "version: v1\n"}
`), 0, "apply", "-f", "-")
	kubectl(t, []byte(`apiVersion: velero.io/v1
kind: Backup
metadata: {name: nightly, namespace: external}
spec:
  includedNamespaces: [billing]
  resourcePolicy: {kind: configmap, name: policies}
`), 0, "apply", "--dry-run=server", "-f", "-")
}

// The harness's S3 server is a real versitygw: buckets are directories and
// objects are files in its data dir.
func TestHarnessS3(t *testing.T) {
	ctx := context.Background()
	client := s3.New(s3.Options{
		BaseEndpoint: aws.String(env.S3.URL),
		Region:       env.S3.Region,
		Credentials:  credentials.NewStaticCredentialsProvider(env.S3.AccessKey, env.S3.SecretKey, ""),
		UsePathStyle: true,
	})
	bucket := "harness-check"
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("create bucket: %v\n%s", err, env.S3.Log())
	}
	if _, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("a/b.txt"), Body: strings.NewReader("hello")}); err != nil {
		t.Fatalf("put: %v", err)
	}
	list, err := client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if len(list.Contents) != 1 || aws.ToString(list.Contents[0].Key) != "a/b.txt" {
		t.Fatalf("list = %+v", list.Contents)
	}
	b, err := os.ReadFile(filepath.Join(env.S3.DataDir, bucket, "a", "b.txt"))
	if err != nil || string(b) != "hello" {
		t.Fatalf("object file = %q, %v", b, err)
	}
}
