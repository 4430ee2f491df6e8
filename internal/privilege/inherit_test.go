package privilege

import (
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
)

func i64(v int64) *int64 { return &v }

type podOpt func(*corev1.Pod)

func pod(name string, age time.Duration, opts ...podOpt) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "db"}, CreationTimestamp: metav1.NewTime(time.Unix(1e9, 0).Add(-age))},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsUser: i64(1000), RunAsGroup: i64(1000), FSGroup: i64(2000), SupplementalGroups: []int64{3000}},
			Volumes:         []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}},
			Containers: []corev1.Container{
				{Name: "sidecar"},
				{Name: "db", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/db"}}, SecurityContext: &corev1.SecurityContext{RunAsUser: i64(999)}},
			},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, o := range opts {
		o(&p)
	}
	return p
}

func TestFindWorkload(t *testing.T) {
	consumer := &snapv1.InheritSecurityContextFrom{PvcConsumer: &snapv1.Empty{}}
	selector := func(container string) *snapv1.InheritSecurityContextFrom {
		return &snapv1.InheritSecurityContextFrom{WorkloadSelector: &snapv1.WorkloadSelector{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}, Container: container}}
	}
	pending := func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }
	labelled := func(p *corev1.Pod) { p.Labels[wellknown.LabelOp] = "snapshot" }
	mover := func(p *corev1.Pod) {
		labelled(p)
		isController := true
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "mover", UID: "j", Controller: &isController}}
	}
	reader := func(p *corev1.Pod) { p.Spec.Containers[1].VolumeMounts[0].ReadOnly = true }
	otherClaim := func(p *corev1.Pod) { p.Spec.Volumes[0].PersistentVolumeClaim.ClaimName = "other" }
	unpinned := func(p *corev1.Pod) {
		p.Spec.SecurityContext.RunAsUser = nil
		p.Spec.Containers[1].SecurityContext = nil
	}
	root := func(p *corev1.Pod) { p.Spec.Containers[1].SecurityContext.RunAsUser = i64(0) }
	tests := []struct {
		name      string
		from      *snapv1.InheritSecurityContextFrom
		pods      []corev1.Pod
		pod, ctr  string
		uid       int64
		notReason string
	}{
		{"consumer: the container mounting the claim, its user over the pod's", consumer, []corev1.Pod{pod("db-0", time.Hour)}, "db-0", "db", 999, ""},
		{"consumer: the oldest running pod", consumer, []corev1.Pod{pod("db-1", time.Minute), pod("db-0", time.Hour)}, "db-0", "db", 999, ""},
		{"consumer: pending pods and movers do not count", consumer, []corev1.Pod{pod("db-0", time.Hour, pending), pod("mover", time.Hour, mover), pod("db-1", time.Minute)}, "db-1", "db", 999, ""},
		{"consumer: a snapflow label alone does not hide the workload", consumer, []corev1.Pod{pod("db-0", time.Hour, labelled)}, "db-0", "db", 999, ""},
		{"consumer: a writer before an older reader", consumer, []corev1.Pod{pod("backup-reader", 2*time.Hour, reader), pod("db-0", time.Hour)}, "db-0", "db", 999, ""},
		{"consumer: a pod that pins no user is passed over", consumer, []corev1.Pod{pod("debug", 2*time.Hour, unpinned), pod("db-0", time.Hour)}, "db-0", "db", 999, ""},
		{"consumer: no pod mounts the claim", consumer, []corev1.Pod{pod("db-0", time.Hour, otherClaim)}, "", "", 0, ReasonNoWorkloadPod},
		{"consumer: the pod pins no user", consumer, []corev1.Pod{pod("db-0", time.Hour, unpinned)}, "", "", 0, ReasonIdentityUnset},
		{"consumer: a root workload is inherited (the gate decides)", consumer, []corev1.Pod{pod("db-0", time.Hour, root)}, "db-0", "db", 0, ""},
		{"selector: the first container when none is named", selector(""), []corev1.Pod{pod("db-0", time.Hour, otherClaim)}, "db-0", "sidecar", 1000, ""},
		{"selector: the named container", selector("db"), []corev1.Pod{pod("db-0", time.Hour)}, "db-0", "db", 999, ""},
		{"selector: a container the pod lacks", selector("web"), []corev1.Pod{pod("db-0", time.Hour)}, "", "", 0, ReasonNoContainer},
		{"selector: nothing matches", selector(""), []corev1.Pod{pod("db-0", time.Hour, func(p *corev1.Pod) { p.Labels = nil })}, "", "", 0, ReasonNoWorkloadPod},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := FindWorkload(tt.from, "data", tt.pods)
			if tt.notReason != "" {
				var ni *NotInherited
				if !errors.As(err, &ni) || ni.Reason != tt.notReason || ni.Message == "" {
					t.Fatalf("got %v, %v; want reason %s", w, err, tt.notReason)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if w.Pod != tt.pod || w.Container != tt.ctr || *w.Identity.RunAsUser != tt.uid {
				t.Fatalf("got %s/%s uid %d, want %s/%s uid %d", w.Pod, w.Container, *w.Identity.RunAsUser, tt.pod, tt.ctr, tt.uid)
			}
			if *w.Identity.FSGroup != 2000 || len(w.Identity.SupplementalGroups) != 1 || *w.Identity.RunAsGroup != 1000 {
				t.Fatalf("pod-level identity lost: %+v", w.Identity)
			}
		})
	}
	if w, err := FindWorkload(nil, "data", nil); w != nil || err != nil {
		t.Fatal("nothing asked: nothing found")
	}
}

// TestInheritLadder checks hardened < moverDefaults < inherited < explicit,
// field by field, and what the gate makes of a root workload.
func TestInheritLadder(t *testing.T) {
	id := &corev1.PodSecurityContext{RunAsUser: i64(1000), RunAsGroup: i64(1001), FSGroup: i64(2000), SupplementalGroups: []int64{3000}}
	defaults := &snapv1.MoverDefaults{SecurityContext: &corev1.SecurityContext{RunAsUser: i64(4000)}, PodSecurityContext: &corev1.PodSecurityContext{FSGroup: i64(4001)}}
	tests := []struct {
		name          string
		m             *snapv1.MoverSpec
		id            *corev1.PodSecurityContext
		uid, gid, fsg int64
	}{
		{"nothing inherited: defaults over hardened", nil, nil, 4000, DefaultUID, 4001},
		{"inherited beats the defaults, even their container layer", nil, id, 1000, 1001, 2000},
		{"explicit pod settings beat inherited", &snapv1.MoverSpec{PodSecurityContext: &corev1.PodSecurityContext{RunAsUser: i64(5000), FSGroup: i64(5001)}}, id, 5000, 1001, 5001},
		{"explicit container settings beat inherited", &snapv1.MoverSpec{SecurityContext: &corev1.SecurityContext{RunAsGroup: i64(6000)}}, id, 1000, 6000, 2000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before *snapv1.MoverSpec
			if tt.m != nil {
				before = tt.m.DeepCopy()
			}
			pod, c := SecurityContexts(defaults, Inherit(tt.m, tt.id))
			uid, gid := Effective(pod, c)
			if *uid != tt.uid || *gid != tt.gid || *pod.FSGroup != tt.fsg {
				t.Fatalf("runs as %d:%d fsGroup %d, want %d:%d fsGroup %d", *uid, *gid, *pod.FSGroup, tt.uid, tt.gid, tt.fsg)
			}
			if tt.id != nil && len(pod.SupplementalGroups) != 1 {
				t.Fatalf("supplemental groups not inherited: %v", pod.SupplementalGroups)
			}
			if tt.m != nil && (before.PodSecurityContext == nil) != (tt.m.PodSecurityContext == nil) {
				t.Fatal("Inherit changed the policy's own settings")
			}
		})
	}
	// privilegedMode keeps running as root.
	pod, c := SecurityContexts(nil, Inherit(&snapv1.MoverSpec{PrivilegedMode: true}, id))
	if uid, _ := Effective(pod, c); *uid != 0 {
		t.Fatalf("privilegedMode with an inherited identity runs as %d, want root", *uid)
	}
	// A backup keeps its own fsGroup and reads through the workload's.
	b := ForBackup(id)
	if b.FSGroup != nil || len(b.SupplementalGroups) != 2 || b.SupplementalGroups[1] != 2000 || id.FSGroup == nil {
		t.Fatalf("ForBackup gave %+v (input now %+v)", b, id)
	}
	rootID := &corev1.PodSecurityContext{RunAsUser: i64(0)}
	if r := Mover(nil, Inherit(nil, rootID), nil); len(r) == 0 {
		t.Fatal("a mover inheriting root must need the namespace's opt-in")
	}
	if r := Mover(nil, Inherit(nil, id), nil); len(r) != 0 {
		t.Fatalf("a mover inheriting uid 1000 needs no opt-in, got %v", r)
	}
}

func TestInheritRunAsNonRootFollowsTheUser(t *testing.T) {
	// An explicit user over an inherited root is no root, and a
	// workload's runAsNonRoot: false with a user of its own is not either.
	if r := Mover(nil, Inherit(&snapv1.MoverSpec{PodSecurityContext: &corev1.PodSecurityContext{RunAsUser: i64(5000)}}, &corev1.PodSecurityContext{RunAsUser: i64(0)}), nil); len(r) != 0 {
		t.Fatalf("explicit uid 5000 over an inherited root needs the opt-in: %v", r)
	}
	if r := Mover(nil, Inherit(&snapv1.MoverSpec{SecurityContext: &corev1.SecurityContext{RunAsUser: i64(5000)}}, &corev1.PodSecurityContext{RunAsUser: i64(0)}), nil); len(r) != 0 {
		t.Fatalf("an explicit container uid 5000 over an inherited root needs the opt-in: %v", r)
	}
	f := false
	if w, _ := FindWorkload(&snapv1.InheritSecurityContextFrom{PvcConsumer: &snapv1.Empty{}}, "data", []corev1.Pod{pod("db-0", time.Hour, func(p *corev1.Pod) { p.Spec.SecurityContext.RunAsNonRoot = &f })}); len(Mover(nil, Inherit(nil, w.Identity), nil)) != 0 {
		t.Fatal("a workload's runAsNonRoot: false made a uid-999 mover need the opt-in")
	}
}
