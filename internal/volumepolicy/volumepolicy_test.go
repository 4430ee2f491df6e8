package volumepolicy

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func pv(mutate func(*corev1.PersistentVolume)) *corev1.PersistentVolume {
	p := &corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{
		Capacity:         corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("50Gi")},
		StorageClassName: "gp2",
		PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
			Driver: "ebs.csi.aws.com", VolumeAttributes: map[string]string{"protocol": "nvme", "tier": "fast"}}},
	}}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func pvc(mutate func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	mode := corev1.PersistentVolumeFilesystem
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Labels: map[string]string{"env": "prod", "app": "pg"}},
		Spec:       corev1.PersistentVolumeClaimSpec{VolumeMode: &mode, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}},
		Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound},
	}
	if mutate != nil {
		mutate(c)
	}
	return c
}

func podVol(src corev1.VolumeSource) *corev1.Volume {
	return &corev1.Volume{Name: "v", VolumeSource: src}
}

func nfsPV(server, path string) *corev1.PersistentVolume {
	return pv(func(p *corev1.PersistentVolume) {
		p.Spec.PersistentVolumeSource = corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: server, Path: path}}
		p.Spec.StorageClassName = ""
	})
}

func TestConditions(t *testing.T) {
	block := corev1.PersistentVolumeBlock
	tests := []struct {
		name string
		cond string // YAML of the conditions map
		vol  Volume
		want bool
	}{
		{"empty matches everything", `{}`, Volume{PV: pv(nil), PVC: pvc(nil)}, true},
		{"empty matches an unbound PVC", `{}`, Volume{PVC: pvc(nil)}, true},
		{"capacity inside", `{capacity: "10Gi,100Gi"}`, Volume{PV: pv(nil)}, true},
		{"capacity inclusive lower", `{capacity: "50Gi,100Gi"}`, Volume{PV: pv(nil)}, true},
		{"capacity inclusive upper", `{capacity: "10Gi,50Gi"}`, Volume{PV: pv(nil)}, true},
		{"capacity below", `{capacity: "60Gi,100Gi"}`, Volume{PV: pv(nil)}, false},
		{"capacity above", `{capacity: "1Gi,10Gi"}`, Volume{PV: pv(nil)}, false},
		{"capacity open upper", `{capacity: "10Gi,"}`, Volume{PV: pv(nil)}, true},
		{"capacity open lower", `{capacity: ",100Gi"}`, Volume{PV: pv(nil)}, true},
		{"capacity needs a PV", `{capacity: "1Gi,"}`, Volume{PVC: pvc(nil)}, false},
		{"storageClass listed", `{storageClass: [ebs-sc, gp2]}`, Volume{PV: pv(nil)}, true},
		{"storageClass not listed", `{storageClass: [ebs-sc]}`, Volume{PV: pv(nil)}, false},
		{"storageClass with none on the volume", `{storageClass: [gp2]}`, Volume{PV: nfsPV("nas", "/x")}, false},
		{"nfs any", `{nfs: {}}`, Volume{PV: nfsPV("nas", "/export")}, true},
		{"nfs on a csi volume", `{nfs: {}}`, Volume{PV: pv(nil)}, false},
		{"nfs server", `{nfs: {server: nas}}`, Volume{PV: nfsPV("nas", "/export")}, true},
		{"nfs other server", `{nfs: {server: other}}`, Volume{PV: nfsPV("nas", "/export")}, false},
		{"nfs path", `{nfs: {path: /export}}`, Volume{PV: nfsPV("nas", "/export")}, true},
		{"nfs server and path", `{nfs: {server: nas, path: /other}}`, Volume{PV: nfsPV("nas", "/export")}, false},
		{"csi any", `{csi: {}}`, Volume{PV: pv(nil)}, true},
		{"csi on nfs", `{csi: {}}`, Volume{PV: nfsPV("nas", "/x")}, false},
		{"csi driver", `{csi: {driver: ebs.csi.aws.com}}`, Volume{PV: pv(nil)}, true},
		{"csi other driver", `{csi: {driver: efs.csi.aws.com}}`, Volume{PV: pv(nil)}, false},
		{"csi attribute subset", `{csi: {driver: ebs.csi.aws.com, volumeAttributes: {tier: fast}}}`, Volume{PV: pv(nil)}, true},
		{"csi attribute mismatch", `{csi: {driver: ebs.csi.aws.com, volumeAttributes: {tier: slow}}}`, Volume{PV: pv(nil)}, false},
		{"csi attribute missing", `{csi: {driver: ebs.csi.aws.com, volumeAttributes: {zone: a}}}`, Volume{PV: pv(nil)}, false},
		{"volumeTypes csi", `{volumeTypes: [nfs, csi]}`, Volume{PV: pv(nil)}, true},
		{"volumeTypes exact case", `{volumeTypes: [CSI]}`, Volume{PV: pv(nil)}, false},
		{"volumeTypes hostPath", `{volumeTypes: [hostPath]}`, Volume{PV: pv(func(p *corev1.PersistentVolume) {
			p.Spec.PersistentVolumeSource = corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/d"}}
		})}, true},
		{"volumeTypes storageOS as Velero spells it", `{volumeTypes: [storageOS]}`, Volume{PV: pv(func(p *corev1.PersistentVolume) {
			p.Spec.PersistentVolumeSource = corev1.PersistentVolumeSource{StorageOS: &corev1.StorageOSPersistentVolumeSource{VolumeName: "v"}}
		})}, true},
		{"volumeTypes local", `{volumeTypes: [local]}`, Volume{PV: pv(func(p *corev1.PersistentVolume) {
			p.Spec.PersistentVolumeSource = corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/mnt"}}
		})}, true},
		{"pvcLabels subset", `{pvcLabels: {env: prod}}`, Volume{PV: pv(nil), PVC: pvc(nil)}, true},
		{"pvcLabels mismatch", `{pvcLabels: {env: dev}}`, Volume{PV: pv(nil), PVC: pvc(nil)}, false},
		{"pvcLabels on an unlabelled PVC", `{pvcLabels: {env: prod}}`, Volume{PVC: pvc(func(c *corev1.PersistentVolumeClaim) { c.Labels = nil })}, false},
		{"pvcLabels without a PVC", `{pvcLabels: {env: prod}}`, Volume{PV: pv(nil)}, false},
		{"pvcPhase any of", `{pvcPhase: [Pending, Bound]}`, Volume{PVC: pvc(nil)}, true},
		{"pvcPhase other", `{pvcPhase: [Lost]}`, Volume{PVC: pvc(nil)}, false},
		{"pvcVolumeMode", `{pvcVolumeMode: Filesystem}`, Volume{PVC: pvc(nil)}, true},
		{"pvcVolumeMode block", `{pvcVolumeMode: Block}`, Volume{PVC: pvc(func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeMode = &block })}, true},
		{"pvcVolumeMode case-sensitive", `{pvcVolumeMode: filesystem}`, Volume{PVC: pvc(nil)}, false},
		{"pvcVolumeMode unset on the PVC", `{pvcVolumeMode: Filesystem}`, Volume{PVC: pvc(func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeMode = nil })}, false},
		{"pvcAccessModes exact set", `{pvcAccessModes: [ReadWriteOnce]}`, Volume{PVC: pvc(nil)}, true},
		{"pvcAccessModes superset does not match", `{pvcAccessModes: [ReadWriteOnce, ReadOnlyMany]}`, Volume{PVC: pvc(nil)}, false},
		{"pvcAccessModes order-insensitive", `{pvcAccessModes: [ReadOnlyMany, ReadWriteOnce]}`, Volume{PVC: pvc(func(c *corev1.PersistentVolumeClaim) {
			c.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadOnlyMany}
		})}, true},
		{"all conditions AND", `{storageClass: [gp2], pvcLabels: {env: prod}, capacity: "1Gi,"}`, Volume{PV: pv(nil), PVC: pvc(nil)}, true},
		{"one failing condition fails the rule", `{storageClass: [gp2], pvcLabels: {env: dev}}`, Volume{PV: pv(nil), PVC: pvc(nil)}, false},
		// Pod volumes, as Velero types them: inline sources by their own
		// name, with no capacity or storage class; a PVC's by its PV.
		{"pod emptyDir by type", `{volumeTypes: [emptyDir]}`, Volume{PodVolume: podVol(corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}})}, true},
		{"pod emptyDir exact case", `{volumeTypes: [emptydir]}`, Volume{PodVolume: podVol(corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}})}, false},
		{"pod configMap by type", `{volumeTypes: [configMap, secret]}`, Volume{PodVolume: podVol(corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}})}, true},
		{"pod projected is not secret", `{volumeTypes: [secret]}`, Volume{PodVolume: podVol(corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}})}, false},
		{"pod inline nfs", `{nfs: {server: nas}}`, Volume{PodVolume: podVol(corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nas", Path: "/x"}})}, true},
		{"pod inline nfs is typed nfs", `{volumeTypes: [nfs]}`, Volume{PodVolume: podVol(corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nas", Path: "/x"}})}, true},
		{"pod inline csi with attributes", `{csi: {driver: secrets-store.csi.k8s.io, volumeAttributes: {provider: vault}}}`, Volume{PodVolume: podVol(corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{
			Driver: "secrets-store.csi.k8s.io", VolumeAttributes: map[string]string{"provider": "vault"}}})}, true},
		{"pod volume has no storage class", `{storageClass: [gp2]}`, Volume{PodVolume: podVol(corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}})}, false},
		{"pod volume has no capacity", `{capacity: "1Gi,"}`, Volume{PodVolume: podVol(corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}})}, false},
		{"pod volume never matches pvcVolumeMode", `{pvcVolumeMode: Filesystem}`, Volume{PodVolume: podVol(corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}})}, false},
		{"pod volume of a PVC is typed by its PV", `{volumeTypes: [csi], storageClass: [gp2]}`, Volume{PV: pv(nil), PVC: pvc(nil),
			PodVolume: podVol(corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}})}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc, err := Parse([]byte("version: v1\nvolumePolicies:\n- conditions: " + tc.cond + "\n  action: {type: skip}\n"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := doc.Validate(); err != nil {
				t.Fatal(err)
			}
			if got := doc.VolumePolicies[0].Conditions.Matches(tc.vol); got != tc.want {
				t.Fatalf("Matches = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestValidation(t *testing.T) {
	tests := []struct {
		doc  string
		want string
	}{
		{"version: v2\n", `version: "v2" is not supported`},
		{"version: v1\nvolumePolicies:\n- conditions: {}\n  action: {type: backup}\n", `volumePolicies[0].action.type: "backup" is not an action type`},
		{"version: v1\nvolumePolicies:\n- conditions: {}\n  action: {type: skip}\n- conditions: {capacity: 5Gi}\n  action: {type: skip}\n", `volumePolicies[1].conditions.capacity: "5Gi" must be "lower,upper"`},
		{"version: v1\nvolumePolicies:\n- conditions: {capacity: \"100Gi,10Gi\"}\n  action: {type: skip}\n", "lower bound exceeds the upper bound"},
		{"version: v1\nvolumePolicies:\n- conditions: {capacity: \"ten,\"}\n  action: {type: skip}\n", `"ten" is not a quantity`},
		{"version: v1\nvolumePolicies:\n- conditions: {csi: {volumeAttributes: {a: b}}}\n  action: {type: skip}\n", "volumePolicies[0].conditions.csi: the csi driver must be set"},
		{"version: v1\nvolumePolicies:\n- conditions: {}\n  action: {type: fs-backup, parameters: {snapshotClass: x}}\n", `volumePolicies[0].action.parameters.snapshotClass: only supported for the "snapshot" action`},
		{"version: v1\nvolumePolicies:\n- conditions: {}\n  action: {type: snapshot, parameters: {snapshotClass: \"\"}}\n", "must not be empty"},
		{"version: v1\nvolumePolicies:\n- conditions: {}\n  action: {type: snapshot, parameters: {dataMover: rsync}}\n", `"rsync" is not a data mover`},
		{"version: v1\nvolumePolicies:\n- conditions: {}\n  action: {type: snapshot, parameters: {dataMover: 3}}\n", "must be a string, got a number"},
	}
	for _, tc := range tests {
		doc, err := Parse([]byte(tc.doc))
		if err == nil {
			_, err = doc.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.doc, err, tc.want)
		}
	}
	// Custom actions carry any parameters.
	doc, _ := Parse([]byte("version: v1\nvolumePolicies:\n- conditions: {}\n  action: {type: custom, parameters: {myPlugin: true, level: 3}}\n"))
	if _, err := doc.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestStrictDecode(t *testing.T) {
	for doc, want := range map[string]string{
		"version: v1\nvolumePolicy: []\n": `unknown field "volumePolicy"`,
		"version: v1\nvolumePolicies:\n- conditions: {storageClasses: [gp2]}\n  action: {type: skip}\n": `unknown field "volumePolicies[0].conditions.storageClasses"`,
		"version: v1\nvolumePolicies:\n- conditions: {pvcLabels: [a]}\n  action: {type: skip}\n":        "cannot decode",
	} {
		if _, err := Parse([]byte(doc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", doc, err, want)
		}
	}
	w, err := mustParse(t, "version: v1\nvolumePolicies:\n- conditions: {volumeTypes: [emptydir], pvcPhase: [Gone]}\n  action: {type: skip}\n").Validate()
	if err != nil || len(w) != 2 {
		t.Fatalf("never-matching values should warn: %v %v", w, err)
	}
}

func mustParse(t *testing.T, s string) *Document {
	t.Helper()
	d, err := Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// The worked example of Velero's documentation: the recipe's NFS rule comes
// first, then the global gp2 rule.
func TestMerge(t *testing.T) {
	global := mustParse(t, "version: v1\nvolumePolicies:\n- conditions: {storageClass: [gp2]}\n  action: {type: skip}\n- conditions: {}\n  action: {type: fs-backup}\n")
	recipe := mustParse(t, "version: v1\nvolumePolicies:\n- conditions: {nfs: {}}\n  action: {type: fs-backup}\n- conditions: {storageClass: [gp2], pvcLabels: {env: prod}}\n  action: {type: snapshot, parameters: {snapshotClass: ebs-vsc}}\n")

	rules := Merge(recipe, global)
	if len(rules) != 4 || rules[0].Source != FromRecipe || rules[2].Source != FromGlobal || rules[2].Index != 0 {
		t.Fatalf("merged = %+v", rules)
	}
	// The recipe overrides the baseline for its volumes...
	d := Decide(rules, Volume{PV: pv(nil), PVC: pvc(nil)})
	if d.Action != Snapshot || d.Rule.Source != FromRecipe || d.Rule.Index != 1 || d.Rule.Action.SnapshotClass() != "ebs-vsc" {
		t.Fatalf("prod gp2 volume: %+v", d)
	}
	// ...and inherits it for the rest.
	d = Decide(rules, Volume{PV: pv(nil), PVC: pvc(func(c *corev1.PersistentVolumeClaim) { c.Labels = map[string]string{"env": "dev"} })})
	if d.Action != Skip || d.Rule.Source != FromGlobal || d.Rule.Index != 0 {
		t.Fatalf("dev gp2 volume: %+v", d)
	}
	d = Decide(rules, Volume{PV: nfsPV("nas", "/x")})
	if d.Action != FSBackup || d.Rule.Source != FromRecipe || d.Rule.Index != 0 {
		t.Fatalf("nfs volume: %+v", d)
	}
	// Global alone, recipe alone, neither.
	if r := Merge(nil, global); len(r) != 2 || r[0].Source != FromGlobal {
		t.Fatalf("global only: %+v", r)
	}
	if r := Merge(recipe, nil); len(r) != 2 || r[1].Source != FromRecipe {
		t.Fatalf("recipe only: %+v", r)
	}
	if d := Decide(Merge(nil, nil), Volume{PV: pv(nil)}); d.Matched {
		t.Fatalf("no rules: %+v", d)
	}
}

func TestFromConfigMap(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "global", Namespace: "snapflow-system"},
		Data: map[string]string{"policies.yaml": "version: v1\nvolumePolicies:\n- conditions: {}\n  action: {type: skip}\nincludeExcludePolicy: {excludedNamespaceScopedResources: [secrets]}\n"}}
	doc, err := FromConfigMap(cm)
	if err != nil {
		t.Fatal(err)
	}
	if got := doc.OtherSections(); len(got) != 1 || got[0] != "includeExcludePolicy" {
		t.Fatalf("other sections = %v", got)
	}
	cm.Data["second"] = "x"
	if _, err := FromConfigMap(cm); err == nil || !strings.Contains(err.Error(), "exactly one data key (found 2: policies.yaml, second)") {
		t.Fatalf("two keys: %v", err)
	}
}

func TestMergeDocuments(t *testing.T) {
	backup := mustParse(t, "version: v1\nvolumePolicies:\n- conditions: {nfs: {}}\n  action: {type: fs-backup}\nincludeExcludePolicy: {excludedNamespaceScopedResources: [secrets]}\n")
	global := mustParse(t, "version: v1\nvolumePolicies:\n- conditions: {storageClass: [gp2]}\n  action: {type: skip}\nnamespacedFilterPolicies: [{namespaces: [a]}]\n")
	m := MergeDocuments(backup, global)
	if len(m.VolumePolicies) != 2 || m.VolumePolicies[0].Conditions.NFS == nil || m.VolumePolicies[1].Action.Type != Skip {
		t.Fatalf("merged = %+v", m.VolumePolicies)
	}
	if len(m.IncludeExcludePolicy) == 0 || len(m.NamespacedFilterPolicies) != 0 {
		t.Fatal("the backup's own sections stay; the global's other sections never apply")
	}
	if len(backup.VolumePolicies) != 1 {
		t.Fatal("the backup document must not be modified")
	}
	if g := MergeDocuments(nil, global); g.Version != Version || len(g.VolumePolicies) != 1 || len(g.NamespacedFilterPolicies) != 0 {
		t.Fatalf("global only = %+v", g)
	}
}
