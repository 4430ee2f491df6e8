package mover

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// DeletedPrefix starts the termination-message line that lists the members
// a deletion run finished (deleted, or already gone), as indexes into the
// work spec's members. The cleanup function releases a Snapshot only on
// that line: a pod's termination message is written by its own container,
// while a Snapshot's status can be written by any pod holding the mover
// account of its namespace.
const DeletedPrefix = "deleted-members: "

// FormatDeleted renders member indexes as ranges ("0-3,5"), which keeps a
// full batch far inside the 4 KiB Kubernetes keeps of the message.
func FormatDeleted(idx []int) string {
	idx = slices.Clone(idx)
	slices.Sort(idx)
	idx = slices.Compact(idx)
	var parts []string
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && idx[j+1] == idx[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(idx[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", idx[i], idx[j]))
		}
		i = j + 1
	}
	return DeletedPrefix + strings.Join(parts, ",")
}

// ParseDeleted reads the indexes of the DeletedPrefix line of a termination
// message, each below members; a message without the line finished none.
func ParseDeleted(msg string, members int) ([]int, error) {
	for _, line := range strings.Split(msg, "\n") {
		rest, ok := strings.CutPrefix(line, DeletedPrefix)
		if !ok {
			continue
		}
		var out []int
		for _, part := range strings.Split(strings.TrimSpace(rest), ",") {
			if part == "" {
				continue
			}
			lo, hi, isRange := strings.Cut(part, "-")
			a, err := strconv.Atoi(lo)
			if err != nil {
				return nil, fmt.Errorf("deleted members %q: %w", part, err)
			}
			b := a
			if isRange {
				if b, err = strconv.Atoi(hi); err != nil {
					return nil, fmt.Errorf("deleted members %q: %w", part, err)
				}
			}
			if a < 0 || b < a || b >= members {
				return nil, fmt.Errorf("deleted members %q: outside the batch of %d", part, members)
			}
			for i := a; i <= b; i++ {
				out = append(out, i)
			}
		}
		return out, nil
	}
	return nil, nil
}
