package cli

import (
	"io"
	"path/filepath"
	"runtime"

	"github.com/ptscope/ptscope/internal/bundle"
	"github.com/ptscope/ptscope/internal/diff"
	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/load"
	"github.com/ptscope/ptscope/internal/report/diffreport"
	"github.com/ptscope/ptscope/internal/term"
)

const diffUsage = `Usage: ptscope diff [flags] A B

Compare a run with a baseline: two allocator snapshots, two profiler
traces, two ptscope run bundles (their snapshots and their traces), or two
folders of ranks (paired by rank). Every row shows A, B and the change.

Memory: peak allocated and reserved, efficiency and free space, what was
alive at the peak by category, stack (matched by frames, not addresses),
source line and module, steps and the leak pattern, each phase's growth and
peak, out-of-memory events. Traces: step time and its parts, GPU
utilisation, idle time, communication, and every operator and kernel per
step, largest regression first. Findings that appeared or were resolved.

A snapshot against a trace is an error (exit 2). For CI thresholds on the
change, use ptscope check --baseline A B --max-peak-increase 5%.

Examples:
  ptscope diff baseline.pickle candidate.pickle
  ptscope diff --top 20 runs/fp32/latest runs/bf16/latest
  ptscope diff --json base.pt.trace.json.gz new.pt.trace.json.gz > diff.json
  ptscope diff --out diffs/ ranks_before/ ranks_after/
  ptscope diff --html diff.html baseline.pickle candidate.pickle
`

func diffCommand() command {
	c := command{name: "diff", summary: "compare two snapshots, traces, bundles or folders of ranks", usage: diffUsage}
	c.run = func(e *env, args []string) error {
		var out outputFlags
		fs := newFlagSet(e, c)
		addInputFlags(e, fs)
		out.folder = "report.txt and report.json"
		out.register(fs)
		fs.StringVar(&out.html, "html", "", "also write `FILE`: the comparison as one HTML page (its tables and findings, no script)")
		topN := fs.Int("top", 10, "rows of each changed table (stacks, sources, operators, kernels, ...)")
		paths, err := parseInterspersed(fs, args)
		if err != nil {
			return err
		}
		if len(paths) != 2 {
			return usagef("diff: give two inputs, A (the baseline) and B, not %d (see ptscope help diff)", len(paths))
		}
		if paths[0] == "-" && paths[1] == "-" {
			return usagef("diff: only one side can be - (the standard input)")
		}
		if *topN <= 0 {
			return usagef("diff: --top must be at least 1, not %d", *topN)
		}
		t, err := out.text(e.stdout)
		if err != nil {
			return err
		}
		t.Top = *topN
		rep, err := loadDiff(e, paths[0], paths[1])
		if err != nil {
			return err
		}
		doc := diffreport.New(rep)
		out.writeHTML = func(w io.Writer) error { return doc.WriteHTML(w, *topN) }
		return e.emit(doc, &out, t)
	}
	return c
}

// loadDiff loads both sides and compares them.
func loadDiff(e *env, a, b string) (*diff.Report, error) {
	tuneGC()
	p := term.StartProgress(e.stderr, "diff")
	defer p.Stop()
	ka, err := sideKinds(e, a)
	if err != nil {
		return nil, err
	}
	kb, err := sideKinds(e, b)
	if err != nil {
		return nil, err
	}
	if !(ka.memory && kb.memory) && !(ka.trace && kb.trace) {
		return nil, usagef("%v", diff.KindMismatch(a, ka.String(), b, kb.String()))
	}
	load := func(path string, k sideKind, other sideKind) (diff.Input, error) {
		p.SetLabel("diff: reading " + filepath.Base(path))
		return loadSide(e, path, k.memory && other.memory, k.trace && other.trace)
	}
	ia, err := load(a, ka, kb)
	if err != nil {
		return nil, err
	}
	ib, err := load(b, kb, ka)
	if err != nil {
		return nil, err
	}
	return diff.Compare(ia, ib), nil
}

// sideKind is what an input holds.
type sideKind struct{ memory, trace bool }

func (k sideKind) String() string { return diff.Holds(k.memory, k.trace) }

func sideKinds(e *env, path string) (sideKind, error) {
	var k sideKind
	files, err := e.source().Find([]string{path}, input.Snapshot, input.Trace, input.Bundle)
	if err != nil {
		return k, err
	}
	bundles := 0
	for _, f := range files {
		switch f.Kind {
		case input.Snapshot:
			k.memory = true
		case input.Trace:
			k.trace = true
		case input.Bundle:
			bundles++
			b, err := bundle.ReadBundle(f.Path)
			if err != nil {
				return k, err
			}
			for _, r := range b.Ranks {
				k.memory = k.memory || len(r.Snapshots) > 0
				k.trace = k.trace || len(r.Traces) > 0
			}
		}
	}
	if !k.memory && !k.trace && bundles > 0 {
		return k, usagef("diff: %s: the bundle holds no snapshot and no trace (phases only): nothing to compare", path)
	}
	if !k.memory && !k.trace {
		return k, usagef("diff: %s holds no snapshot, trace or bundle", path)
	}
	return k, nil
}

// loadSide analyses what one side holds of the kinds both sides share.
func loadSide(e *env, path string, mem, tr bool) (diff.Input, error) {
	in := diff.Input{Path: path}
	if mem {
		set, err := load.Snapshots(e.ctx, []string{path}, load.SnapshotOptions{AfterRead: runtime.GC, Source: e.source()})
		if err != nil {
			return in, err
		}
		in.Memory = set.Report
	}
	if tr {
		set, err := load.Traces(e.ctx, []string{path}, load.TraceOptions{Source: e.source()})
		if err != nil {
			return in, err
		}
		in.Trace = set.Report
	}
	return in, nil
}
