package cli

import (
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"

	"github.com/ptscope/ptscope/internal/check"
	"github.com/ptscope/ptscope/internal/fleet"
	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/load"
	"github.com/ptscope/ptscope/internal/perf"
	"github.com/ptscope/ptscope/internal/report"
	"github.com/ptscope/ptscope/internal/report/fleetreport"
	"github.com/ptscope/ptscope/internal/term"
)

// FleetThreshold is the number of ranks above which analyze, trace and
// check print a fleet summary instead of every rank's report (--fleet auto).
const FleetThreshold = 8

// fleetFlags are the many-rank flags of analyze, trace and check.
type fleetFlags struct {
	mode string
	rank int
	jobs int
}

func (f *fleetFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.mode, "fleet", "auto", "a summary of many ranks instead of a report per input: auto (above "+strconv.Itoa(FleetThreshold)+" ranks), on or off")
	fs.IntVar(&f.rank, "rank", -1, "only rank `N`'s inputs, with its full report (ranks from bundles, distributedInfo, rankN file and folder names)")
	fs.IntVar(&f.jobs, "jobs", 0, "inputs of a fleet read at once (default: the number of CPUs)")
}

func (f *fleetFlags) validate() error {
	switch f.mode {
	case "auto", "on", "off":
	default:
		return usagef("--fleet must be auto, on or off, not %q", f.mode)
	}
	if f.rank < -1 {
		return usagef("--rank must be a rank number")
	}
	return nil
}

// ranks is the --rank filter for load options (nil: every rank).
func (f *fleetFlags) ranks() []int {
	if f.rank < 0 {
		return nil
	}
	return []int{f.rank}
}

// plan finds the ranks under paths. With --rank N it returns the paths of
// rank N's inputs to analyse as usual (a bundle stays a bundle, limited to
// the rank by the load options' Ranks). Otherwise it returns the inputs
// when they call for a fleet summary, and nil when each input gets its own
// report.
func (f *fleetFlags) plan(e *env, paths []string, kinds ...input.Kind) (*fleet.Inputs, []string, error) {
	if err := f.validate(); err != nil {
		return nil, nil, err
	}
	if f.mode == "off" && f.rank < 0 || (f.mode == "auto" && f.rank < 0 && !anyDir(paths) && len(paths) <= FleetThreshold) {
		// a few files (or stdin, which can be read only once) cannot be
		// more than FleetThreshold ranks
		return nil, paths, nil
	}
	in, err := fleet.Find(e.source(), paths, kinds...)
	if err != nil {
		return nil, nil, err
	}
	if f.rank >= 0 {
		mine := in.Of(f.rank)
		if len(mine) == 0 {
			return nil, nil, usagef("no input of rank %d under %s (%s)", f.rank, strings.Join(paths, ", "), describeRanks(in.Ranks()))
		}
		var out []string
		seen := map[string]bool{}
		for _, x := range mine {
			p := x.Path
			if x.Bundle != nil {
				p = x.Bundle.Dir
			}
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
		return nil, out, nil
	}
	n := len(in.Ranks())
	if f.mode == "on" && n == 0 {
		if msg := otherKindOnly(e, paths, kinds); msg != "" {
			return nil, nil, usagef("--fleet on: %s", msg)
		}
		return nil, nil, usagef("--fleet on: no input with a rank under %s (ranks come from bundles, distributedInfo and rankN names)", strings.Join(paths, ", "))
	}
	if f.mode == "on" || (f.mode == "auto" && n > FleetThreshold) {
		return in, nil, nil
	}
	return nil, paths, nil
}

// otherKindOnly says which command reads paths when they hold none of
// kinds but the other kind of input ("" when they hold neither).
func otherKindOnly(e *env, paths []string, kinds []input.Kind) string {
	files, err := e.source().Find(paths, input.Snapshot, input.Trace)
	if err != nil || len(files) == 0 {
		return ""
	}
	for _, f := range files {
		if slices.Contains(kinds, f.Kind) {
			return ""
		}
	}
	where := strings.Join(paths, ", ")
	if slices.Contains(kinds, input.Snapshot) {
		return "no snapshot under " + where + ", only profiler traces: use ptscope trace --fleet on"
	}
	return "no profiler trace under " + where + ", only snapshots: use ptscope analyze --fleet on"
}

// anyDir reports whether one of paths is a folder.
func anyDir(paths []string) bool {
	for _, p := range paths {
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			return true
		}
	}
	return false
}

// describeRanks writes "ranks 0-999" or "ranks 0, 3, 5" or "no ranks".
func describeRanks(rs []int) string {
	switch {
	case len(rs) == 0:
		return "no ranks found"
	case rs[len(rs)-1]-rs[0] == len(rs)-1:
		return fmt.Sprintf("ranks %d-%d", rs[0], rs[len(rs)-1])
	}
	var parts []string
	for i, r := range rs {
		if i == 8 {
			parts = append(parts, "...")
			break
		}
		parts = append(parts, strconv.Itoa(r))
	}
	return "ranks " + strings.Join(parts, ", ")
}

// summarize reads a fleet with a progress line and a GC suited to many
// small results held one or two at a time.
func (f *fleetFlags) summarize(e *env, command string, in *fleet.Inputs, o fleet.Options) (*fleet.Report, error) {
	o.Workers = f.jobs
	// Each worker's garbage is one input's: the default GC pace keeps the
	// heap near what the workers hold, without a collection per input
	// (SnapshotOptions.AfterRead, which suits one huge snapshot).
	o.Snapshot.AfterRead = nil
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	p := term.StartProgress(e.stderr, command)
	defer p.Stop()
	o.Progress = func(done, total int) { p.SetLabel(fmt.Sprintf("%s: %d of %d inputs", command, done, total)) }
	o.Source = e.source()
	return fleet.Summarize(e.ctx, command, in, o, nil)
}

// emitFleet prints a fleet summary through the output switch; inputs that
// could not be read make it exit 2 after printing, as analyze does.
func (e *env) emitFleet(rep *fleet.Report, paths []string, out *outputFlags, t report.TextOptions) error {
	doc := fleetreport.New(rep, paths)
	doc.Name = out.name
	if err := e.emit(doc, out, t); err != nil {
		return err
	}
	if n := len(rep.Errors); n > 0 {
		return fmt.Errorf("%d of %d inputs could not be read (first: %s)", n, rep.Inputs, rep.Errors[0].Error)
	}
	return nil
}

// fleetAnalyze is analyze's many-rank path: it returns handled=false when
// the inputs get the usual report (paths then are what to analyse).
func (f *fleetFlags) analyze(e *env, user []string, o *load.SnapshotOptions, out *outputFlags, t report.TextOptions) (bool, []string, error) {
	in, paths, err := f.plan(e, user, input.Snapshot)
	if err != nil || in == nil {
		o.Ranks = f.ranks()
		return false, paths, err
	}
	if out.html != "" {
		return true, nil, usagef("--html draws one rank: add --rank N (a fleet of %d ranks has no page)", len(in.Ranks()))
	}
	rep, err := f.summarize(e, "analyze", in, fleet.Options{Snapshot: *o})
	if err != nil {
		return true, nil, err
	}
	if rep.Memory == nil {
		return true, nil, fmt.Errorf("no snapshot of any rank could be read")
	}
	return true, nil, e.emitFleet(rep, user, out, t)
}

// trace is trace's many-rank path.
func (f *fleetFlags) trace(e *env, user []string, opt perf.Options, out *outputFlags, t report.TextOptions) (bool, []string, error) {
	in, paths, err := f.plan(e, user, input.Trace)
	if err != nil || in == nil {
		return false, paths, err
	}
	if out.html != "" {
		return true, nil, usagef("--html draws one rank: add --rank N (a fleet of %d ranks has no page)", len(in.Ranks()))
	}
	rep, err := f.summarize(e, "trace", in, fleet.Options{Trace: opt})
	if err != nil {
		return true, nil, err
	}
	if rep.Time == nil {
		return true, nil, fmt.Errorf("no trace of any rank could be read")
	}
	return true, nil, e.emitFleet(rep, user, out, t)
}

// check is check's many-rank path (and its --rank): thresholds applied to
// every rank's summary, one line per exceeded threshold naming the ranks.
func (f *fleetFlags) check(e *env, paths []string, mf *memoryFlags, l check.Limits) (bool, error) {
	var kinds []input.Kind
	if l.Memory() {
		kinds = append(kinds, input.Snapshot)
	}
	if l.Trace() {
		kinds = append(kinds, input.Trace)
	}
	if err := f.validate(); err != nil {
		return true, err
	}
	if f.mode == "off" && f.rank < 0 || (f.mode == "auto" && f.rank < 0 && !anyDir(paths) && len(paths) <= FleetThreshold) {
		return false, nil
	}
	in, err := fleet.Find(e.source(), paths, kinds...)
	if err != nil {
		return true, err
	}
	if f.rank >= 0 {
		mine := in.Of(f.rank)
		if len(mine) == 0 {
			return true, usagef("no input of rank %d under %s (%s)", f.rank, strings.Join(paths, ", "), describeRanks(in.Ranks()))
		}
		in = &fleet.Inputs{Files: mine}
	} else if n := len(in.Ranks()); !(f.mode == "on" && n > 0) && !(f.mode == "auto" && n > FleetThreshold) {
		return false, nil
	}
	o := fleet.Options{}
	if l.Memory() {
		so, err := mf.options()
		if err != nil {
			return true, err
		}
		o.Snapshot = so
	}
	rep, err := f.summarize(e, "check", in, o)
	if err != nil {
		return true, err
	}
	fails := check.Fleet(e.stdout, rep, l, e.checks)
	for _, x := range rep.Errors {
		fmt.Fprintf(e.stderr, "ptscope: rank %d: %s\n", x.Rank, x.Error)
	}
	if len(fails) > 0 {
		return true, &thresholdError{fails}
	}
	if len(rep.Errors) > 0 {
		return true, fmt.Errorf("%d of %d inputs could not be read", len(rep.Errors), rep.Inputs)
	}
	fmt.Fprintf(e.stdout, "check passed (%d ranks)\n", rep.Ranks)
	return true, nil
}
