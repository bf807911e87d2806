package cli

import (
	"flag"
	"runtime/debug"

	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/units"
)

// addInputFlags sets up what every command that reads inputs shares: the
// memory budget (--max-memory; see docs/security.md), "-" as the command's
// standard input, and Find's warnings on its stderr. Call it right after
// newFlagSet.
func addInputFlags(e *env, fs *flag.FlagSet) {
	input.SetBudget(0)
	input.SetStdin(e.stdin)
	input.SetWarnings(e.stderr)
	applyMemoryLimit()
	input.Watch(e.stderr)
	fs.Func("max-memory", "memory budget (`SIZE`, e.g. 4GiB) for reading and analysing the inputs; an input "+
		"that needs more is refused (exit 2) with the offset reached (default: half of RAM, "+
		units.Bytes(input.DefaultBudget())+" here; docs/security.md)",
		func(s string) error {
			n, err := units.ParseBytes(s)
			if err != nil {
				return err
			}
			if n < 64<<20 {
				return usagef("too small (at least 64MiB)")
			}
			input.SetBudget(n)
			applyMemoryLimit()
			return nil
		})
}

// applyMemoryLimit makes the budget the Go runtime's soft memory limit too:
// the collector then works harder as the heap nears it instead of letting
// garbage pile up (analyze runs at GOGC=400), so only live data can reach
// the budget and fail the readers' checks.
func applyMemoryLimit() {
	debug.SetMemoryLimit(input.Budget())
}
