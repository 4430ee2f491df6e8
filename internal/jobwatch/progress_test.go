package jobwatch

import (
	"context"
	"errors"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/snapflow/snapflow/internal/mover"
	"github.com/snapflow/snapflow/internal/scheme"
)

// logsOf serves a log per pod name; asked records which pod was read.
type logsOf struct {
	logs  map[string]string
	asked []string
}

func (l *logsOf) Tail(_ context.Context, ns, pod, container string) (string, error) {
	l.asked = append(l.asked, ns+"/"+pod+"/"+container)
	log, ok := l.logs[pod]
	if !ok {
		return "", errors.New("no such pod")
	}
	return log, nil
}

// Progress reads only the running pod the Job controls, its newest one.
func TestProgress(t *testing.T) {
	at := time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC)
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "snap", UID: "job-uid"}}
	line := func(bytes int64) string {
		return mover.Progress{Started: at, At: at.Add(time.Second), Files: 1, Bytes: bytes}.String() + "\n"
	}
	pod := func(name string, owned bool, created time.Time, phase corev1.PodPhase) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name, Labels: map[string]string{"job-name": "snap", "app.kubernetes.io/managed-by": "snapflow"}, CreationTimestamp: metav1.NewTime(created)},
			Status: corev1.PodStatus{Phase: phase}}
		if owned {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "snap", UID: "job-uid", Controller: ptrTo(true)}}
		}
		return p
	}
	logs := map[string]string{"old": line(1), "new": line(2), "forged": line(99), "pending": line(3)}
	for _, tc := range []struct {
		name      string
		pods      []client.Object
		wantBytes int64
		wantFound bool
	}{
		{"no pod", nil, 0, false},
		{"a pending pod has no log yet", []client.Object{pod("pending", true, at, corev1.PodPending)}, 0, false},
		{"the newest running pod", []client.Object{pod("old", true, at, corev1.PodRunning), pod("new", true, at.Add(time.Minute), corev1.PodRunning)}, 2, true},
		{"a pod the Job does not control is never read", []client.Object{pod("forged", false, at.Add(time.Hour), corev1.PodRunning), pod("old", true, at, corev1.PodRunning)}, 1, true},
		{"an unreadable log gives nothing", []client.Object{pod("gone", true, at, corev1.PodRunning)}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(tc.pods...).Build()
			r := &logsOf{logs: logs}
			got, ok := Progress(context.Background(), c, r, job, at.Add(time.Minute))
			if ok != tc.wantFound || got.Bytes != tc.wantBytes {
				t.Fatalf("Progress = %+v, %v; want bytes %d, found %v (read %v)", got, ok, tc.wantBytes, tc.wantFound, r.asked)
			}
			for _, a := range r.asked {
				if a != "app/old/mover" && a != "app/new/mover" && a != "app/gone/mover" {
					t.Fatalf("read the log of %s", a)
				}
			}
		})
	}
	if _, ok := Progress(context.Background(), fake.NewClientBuilder().WithScheme(scheme.New()).Build(), nil, job, at); ok {
		t.Fatal("no log reader must give no progress")
	}
}
