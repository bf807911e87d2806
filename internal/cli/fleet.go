package cli

import (
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/ptscope/ptscope/internal/fleet"
	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/load"
	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/perf"
	"github.com/ptscope/ptscope/internal/report"
	"github.com/ptscope/ptscope/internal/report/fleetreport"
	"github.com/ptscope/ptscope/internal/term"
	"github.com/ptscope/ptscope/internal/units"
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

// fleetLimits are check's thresholds (-1 or false: unset).
type fleetLimits struct {
	peak, reserved int64
	eff            float64
	noLeak, noOOM  bool
	trace          *traceChecks
}

func (l fleetLimits) memory() bool {
	return l.peak >= 0 || l.reserved >= 0 || l.eff >= 0 || l.noLeak || l.noOOM
}

// check is check's many-rank path (and its --rank): thresholds applied to
// every rank's summary, one line per exceeded threshold naming the ranks.
func (f *fleetFlags) check(e *env, paths []string, mf *memoryFlags, l fleetLimits) (bool, error) {
	var kinds []input.Kind
	if l.memory() {
		kinds = append(kinds, input.Snapshot)
	}
	if l.trace.any() {
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
	if l.memory() {
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
	fails := fleetFailures(rep, l, e.checks)
	if l.memory() && rep.Memory != nil {
		p := rep.Memory.PeakAllocated
		fmt.Fprintf(e.stdout, "memory: %d ranks, peak allocated %s median, %s max (rank %d), %d OOM, %d leaking\n",
			p.Ranks, units.Bytes(p.MedianBytes), units.Bytes(p.MaxBytes), p.MaxRank, len(rep.Memory.OOMRanks), len(rep.Memory.LeakRanks))
	}
	if l.trace.any() && rep.Time != nil {
		u, d := rep.Time.GPUUtilization, rep.Time.DataLoader
		fmt.Fprintf(e.stdout, "time: %d ranks, GPU utilization %s median, %s min (rank %d), DataLoader %s median, %s max (rank %d)\n",
			u.Ranks, units.Percent(u.MedianRatio), units.Percent(u.MinRatio), u.MinRank, units.Percent(d.MedianRatio), units.Percent(d.MaxRatio), d.MaxRank)
	}
	if l.memory() && rep.Memory == nil {
		fails = append(fails, "no snapshot of any rank could be read")
	}
	if l.trace.any() && rep.Time == nil {
		fails = append(fails, "no trace of any rank could be read")
	}
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

// bad is a rank over a threshold: its value, and that value as the failure
// line says it.
type bad struct {
	rank int
	v    float64
	text string
}

// fleetFailures applies check's thresholds to every rank: one failure per
// threshold, naming the worst ranks first.
func fleetFailures(rep *fleet.Report, l fleetLimits, log *checkLog) []string {
	var fails []string
	add := func(what string, total int, bs []bad, worstFirst func(a, b float64) bool) {
		if len(bs) == 0 {
			return
		}
		sort.SliceStable(bs, func(i, j int) bool { return worstFirst(bs[i].v, bs[j].v) })
		var parts []string
		for i, b := range bs {
			if i == 5 {
				parts = append(parts, fmt.Sprintf("and %d more", len(bs)-5))
				break
			}
			parts = append(parts, fmt.Sprintf("rank %d (%s)", b.rank, b.text))
		}
		fails = append(fails, fmt.Sprintf("%s on %d of %d ranks: %s", what, len(bs), total, strings.Join(parts, ", ")))
	}
	higher := func(a, b float64) bool { return a > b }
	lower := func(a, b float64) bool { return a < b }
	if m := rep.Memory; m != nil {
		var peak, res, eff, leak, oom, unchecked []bad
		for _, r := range m.Ranks {
			if r.PhasesOnly {
				fleetPhasesOnly(r, l, log, &peak, &res, &unchecked)
			}
			if r.Device < 0 { // unreadable ranks fail as rep.Errors
				continue
			}
			// check --json: every rank's value of every threshold
			if l.peak >= 0 {
				log.add(r.Path, r.Device, r.Rank, "peak_allocated_bytes", num(r.PeakAllocatedBytes), float64(l.peak), r.PeakAllocatedBytes <= l.peak)
			}
			if l.reserved >= 0 {
				log.add(r.Path, r.Device, r.Rank, "peak_reserved_bytes", num(r.PeakReservedBytes), float64(l.reserved), r.PeakReservedBytes <= l.reserved)
			}
			if l.eff >= 0 {
				log.add(r.Path, r.Device, r.Rank, "efficiency_at_peak_ratio", num(r.EfficiencyAtPeakRatio), l.eff, r.EfficiencyAtPeakRatio >= l.eff)
			}
			if l.noLeak {
				var leak int64
				if r.Pattern == memory.PatternLeak {
					leak = r.LeakPerStepBytes
				}
				log.add(r.Path, r.Device, r.Rank, "leak_per_step_bytes", num(leak), 0, r.Pattern != memory.PatternLeak)
			}
			if l.noOOM {
				log.add(r.Path, r.Device, r.Rank, "oom_count", num(r.OOMs), 0, r.OOMs == 0)
			}
			if l.peak >= 0 && r.PeakAllocatedBytes > l.peak {
				peak = append(peak, bad{r.Rank, float64(r.PeakAllocatedBytes), units.Bytes(r.PeakAllocatedBytes)})
			}
			if l.reserved >= 0 && r.PeakReservedBytes > l.reserved {
				res = append(res, bad{r.Rank, float64(r.PeakReservedBytes), units.Bytes(r.PeakReservedBytes)})
			}
			if l.eff >= 0 && r.EfficiencyAtPeakRatio < l.eff {
				eff = append(eff, bad{r.Rank, r.EfficiencyAtPeakRatio, units.Percent(r.EfficiencyAtPeakRatio)})
			}
			if l.noLeak && r.Pattern == memory.PatternLeak {
				leak = append(leak, bad{r.Rank, float64(r.LeakPerStepBytes), units.Bytes(r.LeakPerStepBytes) + " per step"})
			}
			if l.noOOM && r.OOMs > 0 {
				oom = append(oom, bad{r.Rank, float64(r.OOMs), units.Plural(r.OOMs, "OOM", "OOMs")})
			}
		}
		n := m.PeakAllocated.Ranks
		add("peak allocated > "+units.Bytes(l.peak), n, peak, higher)
		add("peak reserved > "+units.Bytes(l.reserved), n, res, higher)
		add("efficiency at the peak < "+units.Percent(l.eff), n, eff, lower)
		add("memory leaks", n, leak, higher)
		add("out-of-memory events", n, oom, higher)
		add("unchecked (no allocator snapshot)", len(m.Ranks), unchecked, func(a, b float64) bool { return false })
	}
	if t := rep.Time; t != nil && l.trace != nil {
		var util, dl []bad
		for _, r := range t.Ranks {
			if r.Traces == 0 {
				continue
			}
			if l.trace.minUtil >= 0 {
				log.add(r.Path, -1, r.Rank, "gpu_utilization_ratio", num(r.GPUUtilizationRatio), l.trace.minUtil, r.GPUUtilizationRatio >= l.trace.minUtil)
			}
			if l.trace.maxDL >= 0 {
				log.add(r.Path, -1, r.Rank, "dataloader_ratio", num(r.DataLoaderRatio), l.trace.maxDL, r.DataLoaderRatio <= l.trace.maxDL)
			}
			if l.trace.minUtil >= 0 && r.GPUUtilizationRatio < l.trace.minUtil {
				util = append(util, bad{r.Rank, r.GPUUtilizationRatio, units.Percent(r.GPUUtilizationRatio)})
			}
			if l.trace.maxDL >= 0 && r.DataLoaderRatio > l.trace.maxDL {
				dl = append(dl, bad{r.Rank, r.DataLoaderRatio, units.Percent(r.DataLoaderRatio)})
			}
		}
		n := len(t.Ranks)
		add("GPU utilization < "+units.Percent(l.trace.minUtil), n, util, lower)
		add("DataLoader share > "+units.Percent(l.trace.maxDL), n, dl, higher)
	}
	return fails
}

// fleetPhasesOnly applies the memory thresholds to rank r, recorded with
// phases alone (r.PhasesOnly), as check does to one such rank
// (phasesOnly): the peaks it exceeds join peak and res, and the thresholds
// it cannot be checked against join unchecked, so that nothing passes
// unchecked.
func fleetPhasesOnly(r fleet.RankMemory, l fleetLimits, log *checkLog, peak, res, unchecked *[]bad) {
	var flags []string
	for _, t := range phasesOnly(l, r.PeakAllocatedBytes, r.PeakReservedBytes, true) {
		log.add(r.Path, -1, r.Rank, t.metric, t.value, t.limit, t.ok)
		switch {
		case t.value == nil:
			flags = append(flags, t.flag)
		case t.ok:
		case t.metric == "peak_allocated_bytes":
			*peak = append(*peak, bad{r.Rank, *t.value, units.Bytes(int64(*t.value)) + ", from its phases"})
		default:
			*res = append(*res, bad{r.Rank, *t.value, units.Bytes(int64(*t.value)) + ", from its phases"})
		}
	}
	if len(flags) > 0 {
		*unchecked = append(*unchecked, bad{r.Rank, 0, "phases only: " + strings.Join(flags, " ")})
	}
}
