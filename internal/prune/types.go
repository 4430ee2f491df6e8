package prune

import (
	"encoding/json"
	"fmt"
	"time"
)

// CandidateType is the kind of cleanup unit.
type CandidateType string

// Candidate types.
const (
	TypeBackup               CandidateType = "backup"
	TypeOrphanRepositoryRoot CandidateType = "orphan-repository-root"
	TypeOrphanClusterRoot    CandidateType = "orphan-cluster-root"
	TypeRepositoryStray      CandidateType = "repository-stray"
	TypeOrphanVolumeRoot     CandidateType = "orphan-volume-root"
	// TypeProtectedUserVolume is always in state protected. Ambiguity: it
	// could also be read as a state; it is treated as a type.
	TypeProtectedUserVolume CandidateType = "protected-user-volume"
)

// State is the classification outcome of a candidate.
type State string

// Candidate states. Only StateOrphan is eligible for deletion.
const (
	StateOrphan          State = "orphan"
	StateRetained        State = "retained"
	StateTooYoung        State = "too-young"
	StateProtected       State = "protected"
	StateLive            State = "live"
	StateDependency      State = "dependency"
	StateInvalidManifest State = "invalid-manifest"
)

// DefaultMinAge is the default --min-age (7 days).
const DefaultMinAge = 168 * time.Hour

// DefaultManifestName is the default --manifest-name.
const DefaultManifestName = "kubeblocks-backup.json"

// Options are the planner-relevant flags.
type Options struct {
	// Namespace is --namespace ("" for all).
	Namespace string
	// Prefix is --prefix; it is normalised by the planner.
	Prefix string
	// ManifestName is --manifest-name; "" means DefaultManifestName.
	ManifestName string
	// MinAge is --min-age; zero means DefaultMinAge so that a zero Options
	// never disables the age gate by accident. Use DisableMinAge for "0".
	MinAge time.Duration
	// DisableMinAge is --min-age=0: only objects without a timestamp or dated
	// after the plan time are still young.
	DisableMinAge         bool
	IncludeRetained       bool
	DeleteRepositoryStray bool
	PurgeVersions         bool
	// Versioning is the resolved bucket state (see ResolveVersioning); ""
	// counts as Disabled.
	Versioning       VersioningState
	VersioningSource VersioningSource
}

func (o Options) manifestName() string {
	if o.ManifestName == "" {
		return DefaultManifestName
	}
	return o.ManifestName
}

func (o Options) cutoff(now time.Time) time.Time {
	switch {
	case o.DisableMinAge:
		return now
	case o.MinAge <= 0:
		return now.Add(-DefaultMinAge)
	default:
		return now.Add(-o.MinAge)
	}
}

// versionedScopes reports whether candidate scopes use version listings:
// only with --purge-versions on a bucket that is or was versioned.
func (o Options) versionedScopes() bool {
	return o.PurgeVersions && o.Versioning != "" && o.Versioning != VersioningDisabled
}

// BackupKey identifies a Backup CR.
type BackupKey struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// String renders the key as "namespace/name".
func (k BackupKey) String() string { return k.Namespace + "/" + k.Name }

// IsZero reports whether the key is empty.
func (k BackupKey) IsZero() bool { return k.Namespace == "" && k.Name == "" }

// Protection records the Kubernetes resource that protects a prefix.
type Protection struct {
	Prefix   string `json:"prefix"`
	Kind     string `json:"kind"`
	Resource string `json:"resource"`
}

// Candidate is the unit of classification and deletion.
type Candidate struct {
	Type   CandidateType `json:"type"`
	State  State         `json:"state"`
	Reason string        `json:"reason,omitempty"`
	// Prefix is the candidate's directory or root; ScopePrefix is what gets
	// listed for it (narrower than Prefix when --prefix lies inside a stray
	// directory).
	Prefix      string    `json:"prefix"`
	ScopePrefix string    `json:"scopePrefix"`
	Backup      BackupKey `json:"backup"`
	UID         string    `json:"uid,omitempty"`

	ManifestKey        string `json:"manifestKey,omitempty"`
	ManifestETag       string `json:"manifestETag,omitempty"`
	ManifestVersionID  string `json:"manifestVersionId,omitempty"`
	ManifestGeneration string `json:"manifestGeneration,omitempty"`
	// ManifestLastModified is compared (to the second) only when the
	// manifest has no version identity at all (see CheckManifestHead).
	ManifestLastModified time.Time `json:"-"`

	CreatedAt        time.Time `json:"createdAt"`
	LastModified     time.Time `json:"lastModified"`
	DeletionPolicy   string    `json:"deletionPolicy,omitempty"`
	ParentBackupName string    `json:"parentBackupName,omitempty"`
	BaseBackupName   string    `json:"baseBackupName,omitempty"`

	// Objects is the snapshot this candidate would delete. For strays these
	// are the planned keys only. A plan from a Scan keeps them for strays
	// alone (ObjectCount and Bytes still count every object): FinalSnapshot
	// lists every orphan's scope again before anything is compared or
	// deleted.
	Objects     []Object `json:"-"`
	ObjectCount int      `json:"objectCount"`
	Bytes       int64    `json:"bytes"`
	// FullScope is the whole listing of a cluster-level stray's directory; the
	// executor requires it to be unchanged before it deletes. In a plan from a
	// Scan it is empty but not nil, marking the stray, until FinalSnapshot
	// fills it.
	FullScope []Object `json:"-"`

	DeletionConfigurable bool        `json:"deletionConfigurable"`
	DeferredScan         bool        `json:"deferredScan"`
	Protection           *Protection `json:"protection,omitempty"`

	// Root is the canonical pvc root holding the candidate ("" in fallback
	// mode); ClusterPrefix and ClusterUID locate its cluster directory.
	Root          string `json:"-"`
	ClusterPrefix string `json:"-"`
	ClusterUID    string `json:"-"`
	// Level marks a stray made of the loose objects of one directory level.
	Level bool `json:"-"`
	// ContainedBackups are the backup keys whose data this candidate holds;
	// Dependencies are the parent and base keys it names. Both feed the
	// dependency fixed point that keeps the parents and bases of kept
	// backups.
	ContainedBackups []BackupKey `json:"-"`
	Dependencies     []BackupKey `json:"-"`
}

// Eligible reports whether the candidate is in the deletable state.
func (c Candidate) Eligible() bool { return c.State == StateOrphan }

// Visible reports whether output shows the candidate without --show-all:
// orphan, retained and too-young candidates, and those another --prefix or
// --delete-repository-stray could make deletable.
func (c Candidate) Visible() bool {
	if c.Type == TypeProtectedUserVolume {
		return false
	}
	switch c.State {
	case StateOrphan, StateRetained, StateTooYoung:
		return true
	}
	return c.DeletionConfigurable
}

// RootCounts summarises the canonical roots discovered at the bucket top
// level (the "Discovered PVC roots" line of the plan output).
type RootCounts struct {
	Total         int `json:"total"`
	Repository    int `json:"repository"`
	ProtectedUser int `json:"protectedUser"`
	Unowned       int `json:"unowned"`
	Other         int `json:"other"`
}

// ListCall is one logical S3 listing the planner relied on. Adapters that
// list lazily can use it to list no more than the planner needs.
type ListCall struct {
	Prefix    string `json:"prefix"`
	Recursive bool   `json:"recursive"`
}

// Plan is the read-only outcome of planning. Its JSON form is for output
// only: FinalSnapshot, Recheck and the guards need the Plan value NewPlan
// returned.
type Plan struct {
	GeneratedAt          time.Time         `json:"generatedAt"`
	Repository           string            `json:"repository"`
	RepositoryUID        string            `json:"repositoryUID"`
	RepositoryGeneration int64             `json:"repositoryGeneration"`
	Bucket               string            `json:"bucket"`
	Namespace            string            `json:"namespace,omitempty"`
	Prefix               string            `json:"prefix,omitempty"`
	Prefixes             []string          `json:"prefixes,omitempty"`
	ObjectPrefixes       map[string]string `json:"objectPrefixes"`
	Versioning           VersioningState   `json:"versioning"`
	VersioningSource     VersioningSource  `json:"versioningSource"`
	PurgeVersions        bool              `json:"purgeVersions"`
	IncludeRetained      bool              `json:"includeRetained"`
	MinAge               time.Duration     `json:"minAge"`
	ManifestName         string            `json:"manifestName"`
	VolumeDiscovery      bool              `json:"volumeDiscovery"`
	VolumeRootCounts     RootCounts        `json:"volumeRootCounts"`
	// DeleteRepositoryStray records the flag the plan was made with; the
	// global guards require it for any orphan stray.
	DeleteRepositoryStray bool          `json:"deleteRepositoryStray"`
	Candidates            []Candidate   `json:"candidates"`
	StateCounts           map[State]int `json:"stateCounts"`
	ScannedObjects        int64         `json:"scannedObjects"`
	ScannedBytes          int64         `json:"scannedBytes"`
	UnclassifiedObjects   int64         `json:"unclassifiedObjects"`
	UnclassifiedBytes     int64         `json:"unclassifiedBytes"`
	DeleteObjects         int64         `json:"deleteObjects"`
	DeleteBytes           int64         `json:"deleteBytes"`
	BlockingReasons       []string      `json:"blockingReasons"`
	OrphanVolumeRoots     []string      `json:"orphanVolumeRoots"`
	Listed                []ListCall    `json:"-"`
	// opts are kept for the execution-time functions; a Plan is executed by
	// the process that made it, so they are not serialised.
	opts Options
	// outsideDeps are the parent and base keys named by backup directories
	// the plan saw but left out (outside --prefix); they always remain.
	outsideDeps []BackupKey
}

// Blocked reports whether execution blockers forbid real deletion.
func (p Plan) Blocked() bool { return len(p.BlockingReasons) > 0 }

// VisibleStateCounts counts states over the candidates shown by default
// (see Visible); pass showAll to count every candidate.
func (p Plan) VisibleStateCounts(showAll bool) map[State]int {
	out := map[State]int{}
	for _, c := range p.Candidates {
		if showAll || c.Visible() {
			out[c.State]++
		}
	}
	return out
}

// Options returns the options the plan was made with.
func (p Plan) Options() Options { return p.opts }

// MarshalJSON writes minAge as a Go duration string ("168h0m0s"), as the
// --min-age flag and a prune request spell it, not as nanoseconds.
func (p Plan) MarshalJSON() ([]byte, error) {
	type plain Plan
	return json.Marshal(struct {
		plain
		MinAge string `json:"minAge"`
	}{plain(p), p.MinAge.String()})
}

// UnmarshalJSON reads minAge as a duration string, or as nanoseconds as
// earlier versions wrote it.
func (p *Plan) UnmarshalJSON(b []byte) error {
	type plain Plan
	aux := struct {
		*plain
		MinAge json.RawMessage `json:"minAge"`
	}{plain: (*plain)(p)}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	if len(aux.MinAge) == 0 || string(aux.MinAge) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(aux.MinAge, &s); err == nil {
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("plan minAge %q: %w", s, err)
		}
		p.MinAge = d
		return nil
	}
	var ns int64
	if err := json.Unmarshal(aux.MinAge, &ns); err != nil {
		return fmt.Errorf("plan minAge: want a duration such as \"168h\": %w", err)
	}
	p.MinAge = time.Duration(ns)
	return nil
}
