package kopia

import (
	"math"
	"time"

	"github.com/kopia/kopia/repo/compression"
	"github.com/kopia/kopia/snapshot/policy"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/kopiaflags"
)

// Policy is what snapflow tells kopia about one source: the subset of a
// SnapshotPolicy spec that shapes the upload.
type Policy struct {
	Compressor    string   `json:"compressor,omitempty"`
	NeverCompress []string `json:"neverCompress,omitempty"`
	// IgnoreRules nil means the five-entry default; an empty list ignores nothing.
	IgnoreRules              []string `json:"ignoreRules"`
	IgnoreCacheDirs          *bool    `json:"ignoreCacheDirs,omitempty"`
	IgnoreIdenticalSnapshots bool     `json:"ignoreIdenticalSnapshots,omitempty"`
	IgnoreFileErrors         *bool    `json:"ignoreFileErrors,omitempty"`
	IgnoreDirErrors          *bool    `json:"ignoreDirErrors,omitempty"`
	IgnoreUnknownTypes       *bool    `json:"ignoreUnknownTypes,omitempty"`
	FailFast                 bool     `json:"failFast,omitempty"`
	MaxParallelFileReads     int      `json:"maxParallelFileReads,omitempty"`
	MaxParallelSnapshots     int      `json:"maxParallelSnapshots,omitempty"`
	// UploadLimitMB stops the upload after this many MB (kopia's
	// --upload-limit-mb): the run fails and saves no snapshot.
	UploadLimitMB int `json:"uploadLimitMb,omitempty"`
	// The uploader options spec.extraArgs sets (internal/kopiaflags).
	ParallelUploads     int           `json:"parallelUploads,omitempty"`
	ForceHashPercentage float64       `json:"forceHashPercentage,omitempty"`
	CheckpointInterval  time.Duration `json:"checkpointInterval,omitempty"`
}

// PolicyFromSpec translates the kopia-facing parts of a SnapshotPolicy spec.
func PolicyFromSpec(spec *snapv1.SnapshotPolicySpec) Policy {
	var p Policy
	if c := spec.Compression; c != nil {
		p.Compressor = c.Compressor
		// kopia matches extensions, not the globs users write; entries it
		// cannot match (refused at admission) compress as usual.
		p.NeverCompress, _ = kopiaflags.NeverCompress(c.NeverCompress)
	}
	if f := spec.Files; f != nil {
		p.IgnoreRules = f.IgnoreRules
		p.IgnoreCacheDirs = f.IgnoreCacheDirs
		p.IgnoreIdenticalSnapshots = f.IgnoreIdenticalSnapshots != nil && *f.IgnoreIdenticalSnapshots
	}
	if e := spec.ErrorHandling; e != nil {
		p.IgnoreFileErrors, p.IgnoreDirErrors, p.IgnoreUnknownTypes = e.IgnoreFileErrors, e.IgnoreDirErrors, e.IgnoreUnknownTypes
		p.FailFast = e.FailFast != nil && *e.FailFast
	}
	if u := spec.Upload; u != nil {
		if u.MaxParallelFileReads != nil {
			p.MaxParallelFileReads = int(*u.MaxParallelFileReads)
		}
		if u.MaxParallelSnapshots != nil {
			p.MaxParallelSnapshots = int(*u.MaxParallelSnapshots)
		}
		if u.LimitMb != nil {
			p.UploadLimitMB = int(*u.LimitMb)
		}
	}
	// Admission refuses extraArgs it cannot parse, and those that
	// contradict a typed field; a bypassed webhook's are ignored here and
	// refused by the snapshot function (validate.SnapshotPolicy).
	if x, err := kopiaflags.Parse(spec.ExtraArgs); err == nil {
		p.ParallelUploads, p.ForceHashPercentage, p.CheckpointInterval = x.ParallelUploads, x.ForceHashPercentage, x.CheckpointInterval
		if x.FailFast != nil {
			p.FailFast = *x.FailFast
		}
		if x.UploadLimitMB > 0 {
			p.UploadLimitMB = x.UploadLimitMB
		}
	}
	return p
}

// EffectiveIgnoreRules applies the replace semantics: nil is the default list.
func (p Policy) EffectiveIgnoreRules() []string {
	if p.IgnoreRules == nil {
		return wellknown.DefaultIgnoreRules
	}
	return p.IgnoreRules
}

// keepEverything is kopia's retention set so that kopia itself never expires
// a snapshot: only snapflow's GFS retention deletes.
const keepEverything = math.MaxInt32

func (p Policy) kopiaPolicy() *policy.Policy {
	keep := policy.OptionalInt(keepEverything)
	kp := &policy.Policy{
		RetentionPolicy: policy.RetentionPolicy{
			KeepLatest: &keep, KeepHourly: &keep, KeepDaily: &keep, KeepWeekly: &keep, KeepMonthly: &keep, KeepAnnual: &keep,
			IgnoreIdenticalSnapshots: policy.NewOptionalBool(policy.OptionalBool(p.IgnoreIdenticalSnapshots)),
		},
		FilesPolicy: policy.FilesPolicy{
			IgnoreRules: p.EffectiveIgnoreRules(),
			// The rules above are the whole list: nothing inherited adds to them.
			NoParentIgnoreRules: true,
		},
		CompressionPolicy: policy.CompressionPolicy{
			CompressorName: compression.Name(p.Compressor),
			NeverCompress:  p.NeverCompress,
		},
	}
	if p.IgnoreCacheDirs != nil {
		kp.FilesPolicy.IgnoreCacheDirectories = policy.NewOptionalBool(policy.OptionalBool(*p.IgnoreCacheDirs))
	}
	optBool := func(b *bool) *policy.OptionalBool {
		if b == nil {
			return nil
		}
		return policy.NewOptionalBool(policy.OptionalBool(*b))
	}
	kp.ErrorHandlingPolicy = policy.ErrorHandlingPolicy{
		IgnoreFileErrors:      optBool(p.IgnoreFileErrors),
		IgnoreDirectoryErrors: optBool(p.IgnoreDirErrors),
		IgnoreUnknownTypes:    optBool(p.IgnoreUnknownTypes),
	}
	if p.MaxParallelFileReads > 0 {
		v := policy.OptionalInt(p.MaxParallelFileReads)
		kp.UploadPolicy.MaxParallelFileReads = &v
	}
	if p.MaxParallelSnapshots > 0 {
		v := policy.OptionalInt(p.MaxParallelSnapshots)
		kp.UploadPolicy.MaxParallelSnapshots = &v
	}
	return kp
}
