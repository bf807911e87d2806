package diff

import "fmt"

// Holds names what one side holds, for messages: "allocator snapshots",
// "profiler traces", both, or "nothing ptscope reads".
func Holds(memory, trace bool) string {
	switch {
	case memory && trace:
		return "snapshots and traces"
	case memory:
		return "allocator snapshots"
	case trace:
		return "profiler traces"
	}
	return "nothing ptscope reads"
}

// KindMismatch is the one-line error for two sides that share no kind of
// result (a snapshot against a trace): `ptscope diff` exits 2 with it and
// `ptscope serve` answers it with a 400. aHolds and bHolds come from Holds.
func KindMismatch(a, aHolds, b, bHolds string) error {
	return fmt.Errorf("diff: %s holds %s and %s holds %s: diff compares snapshots with snapshots and traces with traces", a, aHolds, b, bHolds)
}
