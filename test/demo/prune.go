package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/snapflow/snapflow/internal/prune"
	"github.com/snapflow/snapflow/internal/prune/kubeinv"
	"github.com/snapflow/snapflow/test/harness"
)

// The KubeBlocks side of the demo: one BackupRepo in Mount mode whose
// bucket holds a live backup, an orphaned one (its Backup CR is gone), a
// young one, and a volume root nothing in the cluster owns.
const (
	kbNS     = "kb-demo"
	kbRepo   = "demo-repo"
	kbBucket = "kb-demo-backups"
	kbSC     = "kb-demo-repo"
	kbPVC    = "kb-demo-repo-pvc"
	kbRoot   = "pvc-0b5c7c4e-1d2a-4f6e-9b1a-2c3d4e5f6a7b"
	kbOrphan = "pvc-7e6d5c4b-3a2f-4e1d-8c9b-0a1b2c3d4e5f"
	kbUID    = "5f0e3d2c-1b0a-4f9e-8d7c-6b5a4f3e2d1c"
)

func seedKubeBlocks(ctx context.Context, cp *harness.ControlPlane, gw *harness.S3) error {
	c := cp.Client
	cli := s3.New(s3.Options{Region: gw.Region, BaseEndpoint: aws.String(gw.URL), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(gw.AccessKey, gw.SecretKey, "")})
	if _, err := cli.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(kbBucket)}); err != nil {
		return err
	}
	sc := kbSC
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kbNS}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: kbNS, Name: "repo-cred"},
			StringData: map[string]string{"accessKeyId": gw.AccessKey, "secretAccessKey": gw.SecretKey, "endpoint": gw.URL, "region": gw.Region}},
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: kbSC}, Provisioner: prune.CSIDriverS3, Parameters: map[string]string{"bucket": kbBucket}},
		&corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: kbRoot}, Spec: corev1.PersistentVolumeSpec{
			StorageClassName: kbSC, Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}, ClaimRef: &corev1.ObjectReference{Namespace: kbNS, Name: kbPVC},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: prune.CSIDriverS3, VolumeHandle: kbBucket + "/" + kbRoot}}}},
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: kbNS, Name: kbPVC, Labels: map[string]string{prune.LabelBackupRepoName: kbRepo}},
			Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &sc, VolumeName: kbRoot, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}},
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			return fmt.Errorf("create %s: %w", o.GetName(), err)
		}
	}
	repo := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"storageProviderRef": "s3", "pvReclaimPolicy": "Retain", "config": map[string]any{"bucket": kbBucket}}}}
	repo.SetGroupVersionKind(kubeinv.GVKBackupRepo)
	repo.SetName(kbRepo)
	if err := c.Create(ctx, repo); err != nil {
		return err
	}
	repo.Object["status"] = map[string]any{"generatedStorageClassName": kbSC, "backupPVCName": kbPVC,
		"generatedCSIDriverSecret": map[string]any{"namespace": kbNS, "name": "repo-cred"}}
	if err := c.Status().Update(ctx, repo); err != nil {
		return err
	}

	old := time.Now().Add(-30 * 24 * time.Hour)
	dir := func(b string) string { return kbRoot + "/" + kbNS + "/pg-" + kbUID + "/postgresql/" + b }
	put := func(key, body string, backdate bool) error {
		if _, err := cli.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(kbBucket), Key: aws.String(key), Body: strings.NewReader(body)}); err != nil {
			return err
		}
		if backdate { // versitygw keeps objects as files: age them on disk
			return os.Chtimes(filepath.Join(gw.DataDir, kbBucket, key), old, old)
		}
		return nil
	}
	for _, b := range []struct {
		name string
		old  bool
	}{{"pg-full-live", true}, {"pg-full-orphaned", true}, {"pg-incr-today", false}} {
		m, _ := json.Marshal(map[string]any{"apiVersion": prune.ManifestAPIVersion, "kind": "Backup",
			"metadata": map[string]any{"name": b.name, "namespace": kbNS, "uid": "uid-" + b.name, "creationTimestamp": old.Format(time.RFC3339),
				"labels": map[string]any{prune.LabelClusterUID: kbUID}},
			"spec":   map[string]any{"deletionPolicy": "Delete"},
			"status": map[string]any{"path": "/" + strings.TrimPrefix(dir(b.name), kbRoot+"/"), "backupRepoName": kbRepo}})
		if err := put(dir(b.name)+"/"+prune.DefaultManifestName, string(m), b.old); err != nil {
			return err
		}
		if err := put(dir(b.name)+"/data.tar.zst", strings.Repeat(b.name, 100), b.old); err != nil {
			return err
		}
	}
	if err := put(kbOrphan+"/leftover/volume.img", "bytes of a deleted volume", true); err != nil {
		return err
	}
	live := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"labels": map[string]any{prune.LabelClusterUID: kbUID}},
		"spec": map[string]any{"backupPolicyName": "pg-policy", "backupMethod": "pg-basebackup"}}}
	live.SetGroupVersionKind(kubeinv.GVKBackup)
	live.SetNamespace(kbNS)
	live.SetName("pg-full-live")
	if err := c.Create(ctx, live); err != nil {
		return err
	}
	live.Object["status"] = map[string]any{"phase": "Completed", "backupRepoName": kbRepo, "path": "/" + strings.TrimPrefix(dir("pg-full-live"), kbRoot+"/")}
	return c.Status().Update(ctx, live)
}

// prunePlan runs `snapflow prune plan` as an operator would.
func prunePlan(ctx context.Context, cp *harness.ControlPlane) error {
	bin, err := harness.Tool("snapflow")
	if err != nil {
		return err
	}
	args := []string{"--kubeconfig", cp.Kubeconfig, "prune", "plan", "--backup-repo", kbRepo, "--path-style"}
	fmt.Printf("    $ snapflow %s\n", strings.Join(args[2:], " "))
	cmd := exec.CommandContext(ctx, bin, args...)
	out, err := cmd.CombinedOutput()
	fmt.Print(indent(string(out)))
	if err != nil {
		return fmt.Errorf("prune plan: %w", err)
	}
	for _, want := range []string{"pg-full-orphaned", kbOrphan} {
		if !strings.Contains(string(out), want) {
			return fmt.Errorf("the plan does not show %s", want)
		}
	}
	return nil
}
