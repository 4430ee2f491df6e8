package wellknown

// ControllerMetadata are the labels and annotations only snapflow's own
// functions write: each steers a destructive decision (the breaker skips
// what pruned-by marks, the schedule labels put a Snapshot under a
// schedule's history limits) or records who asked for a run. Admission
// refuses them from anyone else, so a tenant cannot mark its deletions as
// snapflow's or claim another sender's request. The why of each is what the
// refusal tells the user.
var ControllerMetadata = []ControlledKey{
	{Key: AnnotationPrunedBy, Annotation: true, Why: "it marks snapflow's own deletions, which the mass-deletion breaker does not count"},
	{Key: AnnotationRequestedBy, Annotation: true, Why: "it records who sent the request event this object was made for"},
	{Key: AnnotationRequestEvent, Annotation: true, Why: "it ties this object to the request event it was made for"},
	{Key: LabelSchedule, Why: "it puts a Snapshot under a schedule's history limits"},
	{Key: LabelScheduleUID, Why: "it puts a Snapshot under a schedule's history limits"},
	// Admission stamps the volume policies on CREATE; changing them later
	// would let a tenant lift the platform's global policy.
	{Key: AnnotationVolumePolicies, Annotation: true, UpdateOnly: true, Why: "admission stamped the volume policies this Snapshot runs under"},
}

// ControlledKey is one controller-owned label or annotation.
type ControlledKey struct {
	Key        string
	Annotation bool
	// UpdateOnly keys are set by the mutating webhook on CREATE, so only a
	// later change is refused.
	UpdateOnly bool
	Why        string
}
