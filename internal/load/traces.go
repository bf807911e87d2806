package load

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ptscope/ptscope/internal/bundle"
	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/kineto"
	"github.com/ptscope/ptscope/internal/perf"
	"github.com/ptscope/ptscope/internal/units"
)

// TraceOptions tune reading and analysing Kineto traces.
type TraceOptions struct {
	Analysis perf.Options
	Reader   kineto.Options
	// KeepModels keeps every trace's model (kineto.Trace) in the result, for
	// a server's timeline view. Without it each trace is dropped as soon as
	// it is analysed, so that memory holds one trace at a time (a trace's
	// model takes about half its JSON size).
	KeepModels bool
	// Progress, when set, is called before each trace is read.
	Progress func(path string, i, n int)
	// Ranks, when set, limits bundles to these ranks (--rank).
	Ranks []int
	// StreamAbove is the estimated JSON size from which a trace is
	// analysed in windows of steps with bounded memory (bigtrace.go): 0
	// means a quarter of the memory budget, a negative value never.
	// Traces are never streamed with KeepModels.
	StreamAbove int64
	// WindowEvents is the number of events a streamed window holds (0:
	// from the memory budget); tests make it small.
	WindowEvents int64
	// Notify, when set, is told when a trace is streamed.
	Notify func(msg string)
	// Source is where the inputs are found and opened, and the memory
	// budget they are read within (nil: the default budget); it is the
	// Reader's Source too.
	Source *input.Source
}

// TraceSet is what Traces returns: the report, and the models when asked.
type TraceSet struct {
	Report *perf.Report
	// Models are the traces, in the order of Report.Ranks (nil entries
	// without TraceOptions.KeepModels).
	Models []*kineto.Trace
}

// Traces reads and analyses Kineto traces: files, folders (searched
// recursively by content) and ptscope run bundles (their ranks' traces), one
// trace per rank. A trace inside a bundle's rank folder gets the rank's
// phases (phases.jsonl): steps when the trace has no step marker, and
// unprofiled step times to measure the profiler's overhead. A trace that
// could be read only in part is analysed and carries warnings; a file that
// cannot be read at all is an error naming it.
func Traces(ctx context.Context, paths []string, opt TraceOptions) (*TraceSet, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	opt.Source = input.Or(opt.Source)
	opt.Reader.Source = opt.Source
	traces, err := tracePaths(paths, opt)
	if err != nil {
		return nil, err
	}
	phases := map[string][]perf.Phase{} // by rank folder
	ranks := make([]*perf.Rank, 0, len(traces))
	models := map[string]*kineto.Trace{}
	for i, p := range traces {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if opt.Progress != nil {
			opt.Progress(p, i, len(traces))
		}
		a := opt.Analysis
		dir := filepath.Dir(p)
		ph, ok := phases[dir]
		if !ok {
			var err error
			ph, err = bundlePhases(dir)
			if err != nil {
				return nil, err
			}
			phases[dir] = ph
		}
		a.Phases = append(a.Phases, ph...)
		r, t, err := analyzeTrace(ctx, p, opt, a)
		if err != nil {
			return nil, err
		}
		ranks = append(ranks, r)
		if t != nil && opt.KeepModels {
			models[p] = t
		}
	}
	set := &TraceSet{Report: perf.Compare(ranks)}
	set.Models = make([]*kineto.Trace, len(set.Report.Ranks))
	for i, r := range set.Report.Ranks {
		set.Models[i] = models[r.Path]
	}
	return set, nil
}

// tracePaths is the Kineto traces among paths: files, those found in
// folders, and the traces of the bundles' ranks (opt.Ranks, when set). An
// empty file, another kind of input, or no trace at all is an error.
func tracePaths(paths []string, opt TraceOptions) ([]string, error) {
	for _, p := range paths {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Size() == 0 {
			return nil, fmt.Errorf("%s: offset 0: empty file", p)
		}
	}
	files, err := opt.Source.Find(paths, input.Trace, input.Bundle)
	if err != nil {
		return nil, err
	}
	var traces []string
	for _, f := range files {
		switch f.Kind {
		case input.Trace:
			traces = append(traces, f.Path)
		case input.Bundle:
			b, err := bundle.ListBundle(f.Path)
			if err != nil {
				return nil, err
			}
			for _, lr := range b.Ranks {
				if opt.Ranks != nil && !contains(opt.Ranks, lr.Rank) {
					continue
				}
				r, err := bundle.ReadRank(lr.Dir, lr.Rank)
				if err != nil {
					return nil, err
				}
				traces = append(traces, r.Traces...)
			}
		default:
			if f.Kind == input.Snapshot {
				return nil, fmt.Errorf("%s: offset 0: an allocator snapshot, not a Kineto trace: read it with ptscope analyze", f.Path)
			}
			if f.Kind == input.Timeline && opt.Source.IsMemoryTimeline(f.Path) {
				return nil, fmt.Errorf("%s: offset 0: %s, not a Kineto trace: ptscope trace reads the profiler's trace (prof.export_chrome_trace or tensorboard_trace_handler)", f.Path, input.TimelineWhat)
			}
			return nil, fmt.Errorf("%s: offset 0: not a Kineto trace (this is a %s)", f.Path, f.Kind)
		}
	}
	if len(traces) == 0 {
		return nil, fmt.Errorf("%s: no Kineto trace found", strings.Join(paths, ", "))
	}
	return traces, nil
}

// analyzeTrace reads and analyses the trace at p with analysis options a:
// in windows of steps when it is larger than opt.StreamAbove (then t is
// nil), else whole, t being its model.
func analyzeTrace(ctx context.Context, p string, opt TraceOptions, a perf.Options) (r *perf.Rank, t *kineto.Trace, err error) {
	if above := opt.StreamAbove; !opt.KeepModels && above >= 0 {
		if above == 0 {
			above = bigTraceBytes(opt.Source)
		}
		if n := traceSize(p); n > above {
			if opt.Notify != nil {
				opt.Notify(fmt.Sprintf("%s: about %s of JSON, more than %s: analysed in windows of steps, with bounded memory%s",
					input.Name(p), units.Bytes(n), thresholdNote(opt.Source, opt.StreamAbove, above), tempNote()))
			}
			r, err := streamTrace(ctx, p, opt.Reader, a, streamOptions{windowEvents: opt.WindowEvents, notify: opt.Notify})
			return r, nil, err
		}
	}
	t, err = kineto.ReadFile(ctx, p, opt.Reader)
	if err != nil {
		return nil, nil, err
	}
	if t.Events.Len() == 0 && len(t.Memory) == 0 && len(t.Flows) == 0 {
		// nothing to analyse: say so rather than report on 0 events
		return nil, nil, fmt.Errorf("%s: offset %d: the trace holds no events (expected a non-empty traceEvents array)", input.Name(p), t.Bytes)
	}
	return perf.Analyze(t, a), t, nil
}

// bundlePhases reads the phases of the bundle rank folder dir (none when dir
// is not one).
func bundlePhases(dir string) ([]perf.Phase, error) {
	root := filepath.Dir(dir)
	if !bundle.IsBundle(root) {
		return nil, nil
	}
	if _, err := os.Stat(filepath.Join(dir, "phases.jsonl")); err != nil {
		return nil, nil
	}
	// Only this rank's folder is read: a bundle of many ranks would
	// otherwise be read whole for each of its traces.
	n, ok := bundle.RankDirNumber(filepath.Base(dir))
	if !ok {
		return nil, nil
	}
	r, err := bundle.ReadRank(dir, n)
	if err != nil {
		return nil, err
	}
	var out []perf.Phase
	for _, p := range r.Phases {
		if p.Aborted || p.Parent != "" {
			continue
		}
		out = append(out, perf.Phase{Name: p.Name, Step: p.Step, StartTimeNS: p.StartTimeUs * 1000, EndTimeNS: p.EndTimeUs * 1000})
	}
	return out, nil
}
