package snapshot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	authzv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/events"
	"github.com/snapflow/snapflow/functions/host"
	"github.com/snapflow/snapflow/internal/fanout"
	"github.com/snapflow/snapflow/internal/repository"
	"github.com/snapflow/snapflow/internal/statuspatch"
	"github.com/snapflow/snapflow/internal/validate"
)

// needsExpansion says whether s stands for more than one (PVC, repository)
// pair. Admission refuses such Snapshots; one that got past it (webhook
// bypassed) fails with a pointer to what expands a policy.
func needsExpansion(s *snapv1.Snapshot, p *snapv1.SnapshotPolicy) bool {
	oneSource := s.Spec.Source != nil || (len(p.Spec.Sources) == 1 && p.Spec.Sources[0].PVCSelector == nil)
	oneRepo := s.Spec.Repository != nil || len(validate.PolicyRefs(p)) == 1
	return !oneSource || !oneRepo
}

// Selected lists, for each pvcSelector source of p, the PVCs it matches now
// (one metadata list of the namespace, matched as fanout.Match does).
func Selected(ctx context.Context, c client.Client, p *snapv1.SnapshotPolicy) (map[int][]string, error) {
	hasSelector := false
	for _, src := range p.Spec.Sources {
		hasSelector = hasSelector || src.PVCSelector != nil
	}
	if !hasSelector {
		return map[int][]string{}, nil
	}
	metas, err := repository.Lookup{Reader: c}.PVCs(ctx, p.Namespace)
	if err != nil {
		return nil, err
	}
	return fanout.Match(p, metas)
}

// expansionRefusals are the policy conditions a firing's expansion
// reports: each turns True while firings are refused for its reason, so the
// refusal shows where users look, and False once a firing expands.
var expansionRefusals = []struct {
	typ, reason, fitsReason string
	fits                    func() string
	refused                 func(error) bool
}{
	{typ: wellknown.ConditionFanoutCapped, reason: "TooManyChildren", fitsReason: "WithinCap",
		fits: func() string {
			return fmt.Sprintf("the last firing expanded within the cap of %d Snapshots", fanout.MaxChildren)
		},
		refused: func(err error) bool { var e fanout.ErrTooMany; return errors.As(err, &e) }},
	{typ: wellknown.ConditionSourcesOverlap, reason: "PVCCoveredTwice", fitsReason: "NoOverlap",
		fits:    func() string { return "no PVC was covered by two sources at the last firing" },
		refused: func(err error) bool { var e fanout.ErrOverlap; return errors.As(err, &e) }},
}

// noteExpansion records on the policy why its last firing was refused, or
// clears a refusal once a firing expands. It writes only when a condition
// changes; another failure (a list error) changes none.
func noteExpansion(ctx context.Context, c client.Client, p *snapv1.SnapshotPolicy, expandErr error) error {
	var want []metav1.Condition
	for _, r := range expansionRefusals {
		have := meta.FindStatusCondition(p.Status.Conditions, r.typ)
		refused := r.refused(expandErr)
		// Only its refusal sets a condition; only a firing that expands clears it.
		if !refused && (expandErr != nil || have == nil || have.Status == metav1.ConditionFalse) {
			continue
		}
		cond := metav1.Condition{Type: r.typ, Status: metav1.ConditionFalse, Reason: r.fitsReason, Message: r.fits(), ObservedGeneration: p.Generation}
		if refused {
			cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, r.reason, expandErr.Error()
		}
		if have == nil || have.Status != cond.Status || have.Message != cond.Message || have.ObservedGeneration != cond.ObservedGeneration {
			want = append(want, cond)
		}
	}
	if len(want) == 0 {
		return nil
	}
	return statuspatch.Update(ctx, c, client.ObjectKeyFromObject(p), func() *snapv1.SnapshotPolicy { return &snapv1.SnapshotPolicy{} },
		func(live *snapv1.SnapshotPolicy) error {
			for _, cond := range want {
				meta.SetStatusCondition(&live.Status.Conditions, cond)
			}
			p.Status.Conditions = live.Status.Conditions
			return nil
		})
}

// ErrNothingSelected means a firing found no PVC to back up.
var ErrNothingSelected = errors.New("nothing to back up")

// MintRefused says whether Mint failed for a reason that lasts until
// someone changes the policy, the PVCs or the configuration: a fan-out
// over the cap, no PVC selected, or the API server refusing the Snapshot.
// Two sources covering one PVC too. Minting again unchanged cannot succeed.
func MintRefused(err error) bool {
	var tooMany fanout.ErrTooMany
	var overlap fanout.ErrOverlap
	return errors.As(err, &tooMany) || errors.As(err, &overlap) || errors.Is(err, ErrNothingSelected) || host.Refused(err)
}

// Minted is what every Snapshot of one firing carries besides its pins.
type Minted struct {
	Origin snapv1.Origin
	Labels map[string]string
	Tags   map[string]string
	// OnScheduleDelete is stamped on a schedule's Snapshots.
	OnScheduleDelete snapv1.CascadePolicy
	// Annotations are stamped on each Snapshot (who requested it).
	Annotations map[string]string
	// Skip names repositories (validate.RepoKey) whose children are not
	// minted: a schedule leaves out suspended ones, so their runs do not
	// wait unfinished and hold back the healthy repositories' slots.
	Skip []string
}

// Mint creates the Snapshots of one firing of p. Names are deterministic,
// so minting the same firing twice creates nothing new. With an
// fanout.ErrOverlap it returns the names it minted for the other PVCs too.
func Mint(ctx context.Context, c client.Client, p *snapv1.SnapshotPolicy, base string, m Minted) ([]string, error) {
	selected, err := Selected(ctx, c, p)
	if err != nil {
		return nil, err
	}
	children, err := fanout.Children(p, base, selected)
	if noteErr := noteExpansion(ctx, c, p, err); noteErr != nil {
		// The conditions only report; minting (or refusing) goes on.
		host.Log(ctx).Info("could not record the expansion conditions on the policy", "policy", p.Namespace+"/"+p.Name, "error", noteErr.Error())
	}
	// Contested PVCs are left out; the others are minted, and the overlap
	// is still returned so every caller reports it.
	var overlap fanout.ErrOverlap
	if err != nil && !errors.As(err, &overlap) {
		return nil, err
	}
	if len(children) == 0 {
		if err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: SnapshotPolicy %s/%s selects no PVC: label the PVCs to back up or fix spec.sources", ErrNothingSelected, p.Namespace, p.Name)
	}
	var names []string
	for _, ch := range children {
		if ch.Repository != nil && slices.Contains(m.Skip, validate.RepoKey(*ch.Repository, p.Namespace)) {
			continue
		}
		labels := map[string]string{wellknown.LabelConfig: p.Name, wellknown.LabelOrigin: string(m.Origin)}
		for k, v := range m.Labels {
			labels[k] = v
		}
		if ch.Source != nil && ch.Source.Group != nil {
			labels[wellknown.LabelVolumeGroup] = ch.Source.Group.VolumeGroupSnapshotName
		}
		s := &snapv1.Snapshot{
			ObjectMeta: metav1.ObjectMeta{Name: ch.Name, Namespace: p.Namespace, Labels: labels, Annotations: m.Annotations},
			Spec: snapv1.SnapshotSpec{PolicyRef: &snapv1.PolicyRef{Name: p.Name}, Source: ch.Source, Repository: ch.Repository,
				Tags: m.Tags, OnScheduleDelete: m.OnScheduleDelete},
		}
		if err := c.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
			return names, fmt.Errorf("create Snapshot %s: %w", ch.Name, err)
		}
		names = append(names, ch.Name)
	}
	return names, err
}

// handleRequest mints the Snapshots a `snapshot requested` event asks for.
func (f *Function) handleRequest(ctx context.Context, e event.Event) error {
	var req events.SnapshotRequest
	if err := json.Unmarshal(e.Data(), &req); err != nil {
		return events.Malformed("snapshot request %s: %v", e.ID(), err)
	}
	if req.Namespace == "" || req.Policy == "" {
		return events.Malformed("snapshot request %s needs data.namespace and data.policy", e.ID())
	}
	// The sender backs up with its own rights, never the function's;
	// checked first, so a sender learns nothing of a namespace it may not use.
	who, err := host.Authorize(ctx, f.Access, authzv1.ResourceAttributes{Verb: "create", Group: snapv1.GroupVersion.Group, Resource: "snapshots", Namespace: req.Namespace})
	if err != nil {
		return err
	}
	var p snapv1.SnapshotPolicy
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: req.Namespace, Name: req.Policy}, &p); err != nil {
		if apierrors.IsNotFound(err) {
			return events.Malformed("snapshot request %s: SnapshotPolicy %s/%s does not exist", e.ID(), req.Namespace, req.Policy)
		}
		return err
	}
	// The event's identity (source and id), not its sender-chosen time,
	// names the firing: a redelivery mints nothing new, and a forged
	// ce-time cannot place a backup in the past for retention to rank.
	key := e.Source() + " " + e.ID() // CloudEvents identity: source and id together
	base := requestBase(req.Policy, key)
	if err := f.claimRequest(ctx, &p, key); err != nil {
		return err
	}
	names, err := Mint(ctx, f.Client, &p, base, Minted{Origin: snapv1.OriginManual, Tags: req.Tags,
		Annotations: map[string]string{wellknown.AnnotationRequestedBy: who, wellknown.AnnotationRequestEvent: key}})
	if MintRefused(err) {
		// The sender must change the request or the configuration first.
		return events.Malformed("snapshot request %s: %v", e.ID(), err)
	}
	if err != nil {
		return err
	}
	host.Log(ctx).Info("minted snapshots for a request", "policy", req.Namespace+"/"+req.Policy, "snapshots", names, "requestedBy", who)
	return nil
}

// requestBase is the name stem of the firing one request event asks for.
func requestBase(policy, key string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return fmt.Sprintf("%s-requested-%08x", policy, h.Sum32())
}

// DefaultRequestInterval is how soon after one request event a policy
// takes another, unless Function.RequestInterval says otherwise.
const DefaultRequestInterval = time.Minute

// requestAllowed refuses a new request firing of p within the request
// interval of the last one, so a flood of events cannot push real history
// out through count-based retention; a redelivery of the same request
// (its Snapshots exist) goes through and mints nothing.
func (f *Function) requestAllowed(ctx context.Context, p *snapv1.SnapshotPolicy, key string) error {
	interval := f.RequestInterval
	if interval == 0 {
		interval = DefaultRequestInterval
	}
	if interval < 0 {
		return nil
	}
	var list snapv1.SnapshotList
	if err := f.Client.List(ctx, &list, client.InNamespace(p.Namespace), client.MatchingLabels{wellknown.LabelConfig: p.Name}); err != nil {
		return err
	}
	var last time.Time
	for _, s := range list.Items {
		id, requested := s.Annotations[wellknown.AnnotationRequestEvent]
		if !requested {
			continue
		}
		if id == key {
			return nil // this request again
		}
		t := s.CreationTimestamp.Time
		if t.IsZero() {
			t = f.now() // not yet stamped: as recent as can be
		}
		if t.After(last) {
			last = t
		}
	}
	// A stamp from the future is not the function's (it stamps now, give or
	// take replicas' clock skew): honouring it would let whoever wrote it
	// turn requests off for good.
	if lr := p.Status.LastRequest; lr != nil && lr.Event != key && lr.At.After(last) && !lr.At.After(f.now().Add(time.Minute)) {
		last = lr.At.Time // claimed by a request whose Snapshots are not listed yet
	}
	if wait := interval - f.now().Sub(last); !last.IsZero() && wait > 0 {
		return events.Malformed("snapshot request for SnapshotPolicy %s/%s: the last request was %s ago, and requests are taken at most once per %s; send it again after %s",
			p.Namespace, p.Name, f.now().Sub(last).Round(time.Second), interval, wait.Round(time.Second))
	}
	if lr := p.Status.LastRequest; lr != nil && lr.Event == key {
		return nil // claimed already: a redelivery finishes minting
	}
	// Claim the firing on the policy's status with an optimistic lock: of
	// two requests that both passed the check above (concurrent deliveries,
	// several replicas), one write wins; the other conflicts and is judged
	// again against the policy as the winner left it.
	patch := client.MergeFromWithOptions(p.DeepCopy(), client.MergeFromWithOptimisticLock{})
	p.Status.LastRequest = &snapv1.RequestStamp{Event: key, At: metav1.NewTime(f.now())}
	if err := f.Client.Status().Patch(ctx, p, patch); err != nil {
		return fmt.Errorf("claim the request firing of SnapshotPolicy %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}

// claimRequest runs requestAllowed until its claim is not lost to a
// concurrent write of the policy (any status update conflicts, not only
// another request's), re-reading the policy each time.
func (f *Function) claimRequest(ctx context.Context, p *snapv1.SnapshotPolicy, key string) error {
	first := true
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !first {
			if err := f.Client.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
				return err
			}
		}
		first = false
		return f.requestAllowed(ctx, p, key)
	})
}
