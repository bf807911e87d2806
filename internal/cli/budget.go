package cli

import (
	"flag"
	"runtime/debug"

	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/units"
)

// addInputFlags sets up what every command that reads inputs shares: the
// memory budget (--max-memory; see docs/security.md). The command's
// input.Source (the budget, "-" as its standard input, Find's warnings on
// its stderr) is made from it when the command first reads (env.source).
// Call it right after newFlagSet.
func addInputFlags(e *env, fs *flag.FlagSet) {
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
			e.budget = n
			return nil
		})
}

// source returns the command's input.Source, made on the first call (after
// the flags are parsed) with the --max-memory budget. Making it also makes
// the budget the Go runtime's soft memory limit (the collector then works
// harder as the heap nears it instead of letting garbage pile up, since
// analyze runs at GOGC=400, so only live data can reach the budget and fail
// the readers' checks), and starts the budget's watchdog, whose error ends
// the command with exit 2 (invoke).
func (e *env) source() *input.Source {
	if e.src != nil {
		return e.src
	}
	e.src = e.serveSource()
	over := e.src.Watch(e.ctx)
	go func() {
		select {
		case err := <-over:
			e.over <- err
		case <-e.ctx.Done():
		}
	}()
	return e.src
}

// serveSource is source without the watchdog, for serve: a server over its
// budget refuses to load more and to compute views (web's guard) instead
// of exiting.
func (e *env) serveSource() *input.Source {
	if e.src == nil {
		e.src = input.NewSource(e.budget, e.stdin, e.stderr).WithContext(e.ctx)
		debug.SetMemoryLimit(e.src.Budget())
	}
	return e.src
}
