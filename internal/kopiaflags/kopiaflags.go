// Package kopiaflags reads spec.extraArgs: the kopia `snapshot create`
// flags a SnapshotPolicy may pass, each mapped to the uploader option it
// sets. kopia runs in process as a library, so only these flags do
// anything; admission refuses the rest.
package kopiaflags

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Flag is one supported flag and the uploader option it sets.
type Flag struct {
	Flag string
	// Value is "" for a boolean flag, else what the value is.
	Value string
	Sets  string
	parse func(v string, o *Options) error
}

// Options are the options extraArgs set; zero values leave kopia's
// defaults.
type Options struct {
	ParallelUploads     int           `json:"parallelUploads,omitempty"`
	ForceHashPercentage float64       `json:"forceHashPercentage,omitempty"`
	CheckpointInterval  time.Duration `json:"checkpointInterval,omitempty"`
	FailFast            *bool         `json:"failFast,omitempty"`
	UploadLimitMB       int           `json:"uploadLimitMb,omitempty"`
}

// Supported are the supported flags, in the order the docs list them.
var Supported = []Flag{
	{Flag: "--parallel", Value: "N, 1 to 1024", Sets: "upload.Uploader.ParallelUploads: files uploaded at once (kopia's default is the CPU count)",
		parse: func(v string, o *Options) (err error) {
			o.ParallelUploads, err = intIn(v, 1, 1024)
			return err
		}},
	{Flag: "--force-hash", Value: "percent, 0 to 100", Sets: "upload.Uploader.ForceHashPercentage: the share of unchanged files hashed again instead of trusting kopia's metadata cache",
		parse: func(v string, o *Options) error {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f < 0 || f > 100 {
				return fmt.Errorf("wants a percentage from 0 to 100, got %q", v)
			}
			o.ForceHashPercentage = f
			return nil
		}},
	{Flag: "--checkpoint-interval", Value: "duration, 1m to 45m", Sets: "upload.Uploader.CheckpointInterval: how often a long upload saves a checkpoint it can resume from",
		parse: func(v string, o *Options) error {
			d, err := time.ParseDuration(v)
			if err != nil || d < time.Minute || d > 45*time.Minute {
				return fmt.Errorf("wants a duration from 1m to 45m (kopia's own limit), got %q", v)
			}
			o.CheckpointInterval = d
			return nil
		}},
	{Flag: "--fail-fast", Sets: "upload.Uploader.FailFast: stop at the first unreadable file (as errorHandling.failFast)",
		parse: func(v string, o *Options) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("wants true or false, got %q", v)
			}
			o.FailFast = &b
			return nil
		}},
	{Flag: "--upload-limit-mb", Value: "MB, 1 or more", Sets: "upload.Uploader.MaxUploadBytes: stop the upload after this much and save no snapshot (as upload.limitMb)",
		parse: func(v string, o *Options) (err error) {
			o.UploadLimitMB, err = intIn(v, 1, 1<<30)
			return err
		}},
}

// refusedArgs are kopia flags that snapflow decides itself, with why.
var refused = map[string]string{
	"--description":           "snapflow writes the description",
	"--tags":                  "snapflow writes the tags that tie a snapshot to its Snapshot",
	"--pin":                   "pin a Snapshot with its spec.pin",
	"--start-time":            "a snapshot's times are when it ran",
	"--end-time":              "a snapshot's times are when it ran",
	"--all":                   "each Snapshot backs up its own source",
	"--override-source":       "the source identity comes from spec.identity",
	"--stdin-file":            "stream sources are spec.sources[].stream",
	"--force-enable-actions":  "hooks are spec.hooks",
	"--force-disable-actions": "hooks are spec.hooks",
	"--flush-per-source":      "each run has one source",
	"--send-snapshot-report":  "results are Events and CloudEvents",
}

// Parse reads spec.extraArgs: "--flag=value", "--flag value" or a
// bare boolean "--flag". Every problem names the argument by index.
func Parse(args []string) (Options, error) {
	var o Options
	seen := map[string]bool{}
	for i := 0; i < len(args); i++ {
		at := i
		name, value, hasValue := strings.Cut(args[i], "=")
		var arg *Flag
		for k := range Supported {
			if Supported[k].Flag == name {
				arg = &Supported[k]
			}
		}
		if arg == nil {
			if why, ok := refused[name]; ok {
				return o, &Error{Index: at, Err: fmt.Errorf("%s is decided by snapflow, not passed to kopia: %s", name, why)}
			}
			return o, &Error{Index: at, Err: fmt.Errorf("%q is not a kopia flag snapflow supports; supported: %s", args[i], List())}
		}
		if seen[name] {
			return o, &Error{Index: at, Err: fmt.Errorf("%s is given twice", name)}
		}
		seen[name] = true
		if !hasValue {
			switch {
			case arg.Value == "":
				value = "true"
			case i+1 < len(args) && !strings.HasPrefix(args[i+1], "--"):
				i++
				value = args[i]
			default:
				return o, &Error{Index: at, Err: fmt.Errorf("%s needs a value (%s), as %s=VALUE", name, arg.Value, name)}
			}
		}
		if err := arg.parse(value, &o); err != nil {
			return o, &Error{Index: at, Err: fmt.Errorf("%s %w", name, err)}
		}
	}
	return o, nil
}

// Error is a problem with spec.extraArgs[Index].
type Error struct {
	Index int
	Err   error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// List lists the supported flags for an error message.
func List() string {
	var b strings.Builder
	for i, a := range Supported {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(a.Flag)
		if a.Value != "" {
			b.WriteString("=<" + a.Value + ">")
		}
	}
	return b.String()
}

func intIn(v string, lo, hi int) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("wants a whole number from %d to %d, got %q", lo, hi, v)
	}
	return n, nil
}
