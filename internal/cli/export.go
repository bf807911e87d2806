package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/ptscope/ptscope/internal/bundle"
	"github.com/ptscope/ptscope/internal/export"
	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/load"
	"github.com/ptscope/ptscope/internal/snapshot"
	"github.com/ptscope/ptscope/internal/term"
	"github.com/ptscope/ptscope/internal/units"
)

// exportUsage is the usage text of export; its "Formats:" list is the
// formats' help, in the order of exportFormats.
func exportUsage() string {
	var b strings.Builder
	b.WriteString(exportUsageHead)
	for _, f := range exportFormats {
		b.WriteString(f.help)
	}
	b.WriteString(exportUsageTail)
	return b.String()
}

const exportUsageHead = `Usage: ptscope export FORMAT [flags] INPUT
       ptscope export parquet -o DIR INPUT...

Write a snapshot or a profiler trace in a format other tools read.

Formats:
`

const exportUsageTail = `
INPUT is a snapshot (pickle or JSON, compressed or not), a Kineto trace
(perfetto only) or a ptscope run bundle (its last snapshot; --rank picks the
rank). The output goes to -o FILE (written atomically) or stdout; a line on
stderr says what was written.

Points (--at, --from, --to): peak, end, start, a trace entry index (560), a
step as analyze numbers them (step:3), or a time since the first entry (1.5s).

Examples:
  ptscope export pprof -o mem.pb.gz snapshot.pickle &&
    go tool pprof -http : mem.pb.gz
  ptscope export pprof --at step:2 -o step2.pb.gz snapshot.pickle
  ptscope export folded snapshot.pickle |
    flamegraph.pl --countname bytes > mem.svg
  ptscope export perfetto -o memory.json snapshot.pickle
  ptscope export perfetto --steps 3-5 --min-duration 10us -o small.json \
    big.pt.trace.json.gz
  ptscope export memory-viz --steps 2-3 --min-size 1MiB -o viz.json \
    snapshot.pickle
  ptscope export memory-viz --steps 2 -o step2.pickle snapshot.pickle &&
    python -m torch.cuda._memory_viz trace_plot step2.pickle -o step2.html
  ptscope export parquet -o /shared/job42/$(hostname) /local/job42/ &&
    duckdb -c "SELECT max(peak_allocated_bytes)
               FROM '/shared/job42/*/ranks.parquet'"
`

type exportFlags struct {
	output      string
	device      int
	at          string
	steps       string
	from, to    string
	minSize     string
	minDuration string
	maxPoints   int
	rank        int
}

func exportCommand() command {
	c := command{name: "export", summary: "write snapshots and traces for pprof, Perfetto, memory_viz, flame graphs", usage: exportUsage()}
	c.run = func(e *env, args []string) error {
		var f exportFlags
		fs := newFlagSet(e, c)
		addInputFlags(e, fs)
		fs.StringVar(&f.output, "o", "", "write to `FILE` instead of stdout (same as --output)")
		fs.StringVar(&f.output, "output", "", "write to `FILE` instead of stdout")
		fs.IntVar(&f.device, "device", -1, "device ordinal of a snapshot (default: every device; pprof and folded need one)")
		fs.StringVar(&f.at, "at", "peak", "pprof, folded: the `POINT` whose live memory is exported")
		fs.StringVar(&f.steps, "steps", "", "perfetto of a trace: ProfilerStep#`A-B`; memory-viz: steps A..B as analyze numbers them")
		fs.StringVar(&f.from, "from", "", "memory-viz: first `POINT` of the window")
		fs.StringVar(&f.to, "to", "", "memory-viz: last `POINT` of the window")
		fs.StringVar(&f.minSize, "min-size", "", "memory-viz: keep only allocations of at least `SIZE` (e.g. 1MiB)")
		fs.StringVar(&f.minDuration, "min-duration", "", "perfetto of a trace: drop events shorter than `DURATION` (e.g. 10us)")
		fs.IntVar(&f.maxPoints, "max-points", export.DefaultMaxPoints, "perfetto of a snapshot: most points per counter track (min/max per bucket keep every peak)")
		fs.IntVar(&f.rank, "rank", -1, "bundles: the rank whose snapshot is exported (default: the lowest)")
		var pf parquetFlags
		pf.register(fs)
		pos, err := parseInterspersed(fs, args)
		if err != nil {
			return err
		}
		if len(pos) == 0 {
			return usagef("export: give a format (%s) and an input; see ptscope help export", formatNames())
		}
		format := pos[0]
		ef := lookupFormat(format)
		if ef == nil {
			return usagef("export: unknown format %q (want one of %s)", format, formatNames())
		}
		set := map[string]bool{}
		fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
		if ef.many != nil {
			return ef.many(e, format, pos[1:], &f, &pf, set)
		}
		if pf.any(set) {
			return runExportParquet(e, format, pos[1:], &f, &pf, set)
		}
		if len(pos) != 2 {
			return usagef("export %s: give exactly one input, not %d", format, len(pos)-1)
		}
		return runExport(e, ef, pos[1], &f, set)
	}
	return c
}

func runExport(e *env, ef *exportFormat, path string, f *exportFlags, set map[string]bool) error {
	format := ef.name
	files, err := e.source().Find([]string{path}, input.Snapshot, input.Trace, input.Bundle)
	if err != nil {
		return err
	}
	if len(files) != 1 {
		return usagef("export %s: %s holds %d inputs; give one snapshot, trace or bundle", format, path, len(files))
	}
	file := files[0]
	kind := file.Kind
	var target *rankTarget // a bundle's rank
	if kind == input.Bundle {
		if target, err = bundleTarget(file.Path, f.rank); err != nil {
			return err
		}
		if target.snap != "" {
			file.Path = target.snap
		}
		kind = input.Snapshot
	} else if set["rank"] {
		return usagef("export: --rank applies to bundles; %s is a %s", path, kind)
	}
	if kind == input.Trace && ef.trace == nil {
		return usagef("export %s: %s is a profiler trace; %s exports allocator snapshots (%s exports traces)", format, file.Path, format, traceFormats())
	}
	for _, name := range formatFlags {
		formats, fkind := flagUse(name)
		if set[name] && (!strings.Contains(" "+formats+" ", " "+format+" ") || fkind != kind) {
			return usagef("export %s: --%s does not apply to a %s (it is for %s of a %s)", format, name, kind, formats, fkind)
		}
	}
	if set["steps"] && !ef.takes("steps", kind) {
		return usagef("export %s: --steps applies to %s", format, stepsUse())
	}
	if set["steps"] && (set["from"] || set["to"]) {
		return usagef("export %s: give --steps or --from/--to, not both", format)
	}
	if set["device"] && kind == input.Trace {
		return usagef("export perfetto: --device applies to snapshots")
	}

	out, err := openOutput(e, f.output, format)
	if err != nil {
		return err
	}
	var summary string
	if kind == input.Trace {
		summary, err = ef.trace(e, file.Path, out, f, set)
	} else {
		summary, err = exportSnapshot(e, format, file.Path, out, f, set, target)
	}
	if err != nil {
		out.abort()
		return err
	}
	if err := out.commit(); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "wrote %s: %s\n", out.name, summary)
	return nil
}

// rankTarget is what an export of a bundle reads: rank r of b, its run
// read as one (a rank recorded in stack windows: snap is "", the run's peak
// view) or its snapshot snap, with what the rank recorded either way.
type rankTarget struct {
	b    *bundle.Bundle
	r    *bundle.Rank
	snap string
}

// bundleTarget is what an export of a bundle reads, from the rank given
// (rank < 0: the lowest with a snapshot), each rank folder read once: for a
// rank recorded in stack windows, its run; for any other, its last
// snapshot.
func bundleTarget(dir string, rank int) (*rankTarget, error) {
	b, err := bundle.ListBundle(dir)
	if err != nil {
		return nil, err
	}
	var ranks []int
	for _, lr := range b.Ranks {
		ranks = append(ranks, lr.Rank)
		if rank >= 0 && lr.Rank != rank {
			continue
		}
		r, err := bundle.ReadRank(lr.Dir, lr.Rank)
		if err != nil {
			return nil, err
		}
		if len(r.Snapshots) == 0 {
			continue
		}
		if r.Info.Windowed() {
			return &rankTarget{b, r, ""}, nil
		}
		return &rankTarget{b, r, r.Snapshots[len(r.Snapshots)-1]}, nil
	}
	if rank >= 0 {
		return nil, usagef("export: %s has no snapshot of rank %d (ranks %v)", dir, rank, ranks)
	}
	return nil, usagef("export: %s holds no snapshot", dir)
}

func exportTrace(e *env, path string, out *output, f *exportFlags, set map[string]bool) (string, error) {
	o := export.TraceTrim{Source: e.source()}
	if set["steps"] {
		a, b, err := parseSteps(f.steps)
		if err != nil {
			return "", err
		}
		o.Steps, o.FirstStep, o.LastStep = true, a, b
	}
	if set["min-duration"] {
		d, err := units.ParseDuration(f.minDuration)
		if err != nil {
			return "", usagef("--min-duration: %v", err)
		}
		o.MinDuration = d.Nanoseconds()
	}
	p := term.StartProgress(e.stderr, "export: reading "+filepath.Base(path))
	defer p.Stop()
	open := func() (io.ReadCloser, error) {
		r, err := o.Source.Open(path)
		if err != nil {
			return nil, err
		}
		return &progressReader{r: r, p: p}, nil
	}
	sum, err := export.TrimTrace(e.ctx, open, out, o)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	p.Stop()
	for _, w := range sum.Warnings {
		fmt.Fprintf(e.stderr, "ptscope: %s: %s\n", path, w)
	}
	s := fmt.Sprintf("Chrome trace JSON, %s of %s events", units.Count(int64(sum.Kept)), units.Count(int64(sum.Events)))
	if o.Steps {
		s += fmt.Sprintf(", ProfilerStep#%d..#%d (%s)", o.FirstStep, o.LastStep, units.Duration(sum.ToNS-sum.FromNS))
	}
	return s, nil
}

// progressReader reports the bytes read to a progress line.
type progressReader struct {
	r *input.Reader
	p *term.Progress
}

func (c *progressReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.p.Add(int64(n))
	return n, err
}

func (c *progressReader) Close() error { return c.r.Close() }

// parseSteps reads "3-5" or "3".
func parseSteps(s string) (int, int, error) {
	a, b, ok := strings.Cut(strings.TrimSpace(s), "-")
	if !ok {
		b = a
	}
	x, err1 := strconv.Atoi(strings.TrimSpace(a))
	y, err2 := strconv.Atoi(strings.TrimSpace(b))
	if err1 != nil || err2 != nil || x < 0 || y < x {
		return 0, 0, usagef("--steps: %q is not a step range (want A-B or N, A <= B)", s)
	}
	return x, y, nil
}

// exportSnapshot exports the snapshot at path; with a target (a bundle's
// rank), read as the bundle reads it: its run, or its snapshot at path.
func exportSnapshot(e *env, format, path string, out *output, f *exportFlags, set map[string]bool, target *rankTarget) (string, error) {
	tuneGC()
	p := term.StartProgress(e.stderr, "export: reading "+filepath.Base(path))
	o := load.SnapshotOptions{AfterRead: runtime.GC, Source: e.source()}
	if f.device >= 0 {
		o.Devices = []int{f.device}
	}
	var loaded *load.SnapshotSet
	var err error
	switch {
	case target == nil:
		loaded, err = load.Snapshots(e.ctx, []string{path}, o)
	case target.snap == "":
		loaded, err = load.BundleRank(e.ctx, target.b, target.r, o)
	default:
		loaded, err = load.BundleSnapshot(e.ctx, target.b, target.r, target.snap, o)
	}
	p.Stop()
	if err != nil {
		return "", err
	}
	in := loaded.Inputs[0]
	s := in.Snapshot
	if len(in.Devices) == 0 {
		if f.device >= 0 {
			return "", usagef("export: %s has no device %d (devices %v)", path, f.device, s.Devices())
		}
		return "", fmt.Errorf("%s: the snapshot holds no segments and no trace entries", path)
	}
	ef := lookupFormat(format)
	if len(in.Devices) > 1 && ef.oneDevice {
		return "", usagef("export %s: %s has devices %v; give --device", format, path, s.Devices())
	}
	var ms []*export.Memory
	for _, a := range in.Devices {
		ms = append(ms, export.FromAnalysis(a, path))
	}
	return ef.snapshot(s, ms, out, f, set)
}

// exportPerfettoMemory writes a snapshot's memory as Perfetto counter
// tracks.
func exportPerfettoMemory(_ *snapshot.Snapshot, ms []*export.Memory, out *output, f *exportFlags, _ map[string]bool) (string, error) {
	sum, err := export.WritePerfetto(out, ms, export.PerfettoOptions{MaxPoints: f.maxPoints})
	if err != nil {
		return "", err
	}
	s := fmt.Sprintf("Chrome trace JSON, %s counter points, %s slices", units.Count(int64(sum.Counters)), units.Count(int64(sum.Slices)))
	if sum.Counters == 0 {
		s += " (the snapshot has no trace entries: nothing to draw over time)"
	}
	if sum.Thinned {
		s += fmt.Sprintf(" (counter tracks thinned to %s points)", units.Count(int64(f.maxPoints)))
	}
	return s, nil
}

// livePoint resolves --at in the memory of the one device exported.
func livePoint(m *export.Memory, f *exportFlags) (int, string, error) {
	pt, err := export.ParsePoint(f.at)
	if err != nil {
		return 0, "", usagef("--at: %v", err)
	}
	at, desc, err := m.Resolve(pt)
	if err != nil {
		return 0, "", usagef("--at: %v", err)
	}
	return at, desc, nil
}

// exportPProf writes the memory alive at --at as a pprof heap profile.
func exportPProf(_ *snapshot.Snapshot, ms []*export.Memory, out *output, f *exportFlags, _ map[string]bool) (string, error) {
	m := ms[0]
	at, desc, err := livePoint(m, f)
	if err != nil {
		return "", err
	}
	sum, err := export.WritePProf(out, m, at, desc)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("pprof heap profile, %s in use (%s allocations) at %s, %s allocated over the recording",
		units.Bytes(sum.InuseBytes), units.Count(sum.InuseObjects), desc, units.Bytes(sum.AllocBytes)), nil
}

// exportFolded writes the memory alive at --at as folded stacks.
func exportFolded(_ *snapshot.Snapshot, ms []*export.Memory, out *output, f *exportFlags, _ map[string]bool) (string, error) {
	m := ms[0]
	at, desc, err := livePoint(m, f)
	if err != nil {
		return "", err
	}
	sum, err := export.WriteFolded(out, m, at, desc)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("folded stacks, %s in %s stacks alive at %s", units.Bytes(sum.Bytes), units.Count(int64(sum.Lines)), desc), nil
}

func exportMemViz(s *snapshot.Snapshot, ms []*export.Memory, out *output, f *exportFlags, set map[string]bool) (string, error) {
	var minSize int64
	if set["min-size"] {
		n, err := units.ParseBytes(f.minSize)
		if err != nil {
			return "", usagef("--min-size: %v", err)
		}
		minSize = n
	}
	var devs []export.MemVizDevice
	windowed := false
	for _, m := range ms {
		w := export.FullWindow(m)
		switch {
		case set["steps"]:
			a, b, err := parseSteps(f.steps)
			if err != nil {
				return "", err
			}
			if w, err = m.StepWindow(a, b); err != nil {
				return "", usagef("--steps: %v", err)
			}
			windowed = true
		case set["from"] || set["to"]:
			if set["from"] {
				lo, err := resolvePoint(m, "--from", f.from)
				if err != nil {
					return "", err
				}
				w.Lo = max(lo, 0)
			}
			if set["to"] {
				hi, err := resolvePoint(m, "--to", f.to)
				if err != nil {
					return "", err
				}
				w.Hi = hi
			}
			if w.Lo > w.Hi {
				return "", usagef("export memory-viz: the window from %q to %q holds no entry of device %d", f.from, f.to, m.Device)
			}
			windowed = true
		}
		devs = append(devs, export.MemVizDevice{Memory: m, Window: w})
	}
	write, form := export.WriteMemViz, "JSON"
	if ext := strings.ToLower(filepath.Ext(out.name)); ext == ".pickle" || ext == ".pkl" {
		write, form = export.WriteMemVizPickle, "pickle"
	}
	sum, err := write(out, s, devs, minSize)
	if err != nil {
		return "", err
	}
	if sum.Misplaced > 0 {
		return "", fmt.Errorf("export memory-viz: %d blocks of the rebuilt allocator state fit no segment; the snapshot's trace and segments disagree", sum.Misplaced)
	}
	desc := fmt.Sprintf("memory_viz snapshot %s, %s trace entries, %s segments, %s active blocks", form, units.Count(int64(sum.Entries)), units.Count(int64(sum.Segments)), units.Count(int64(sum.Blocks)))
	if windowed {
		var parts []string
		for _, d := range devs {
			parts = append(parts, fmt.Sprintf("device %d entries %d..%d", d.Device, d.Window.Lo, d.Window.Hi))
		}
		desc += " (" + strings.Join(parts, ", ") + ")"
	}
	if minSize > 0 {
		desc += ", allocations of at least " + units.Bytes(minSize)
	}
	return desc, nil
}

func resolvePoint(m *export.Memory, flagName, v string) (int, error) {
	pt, err := export.ParsePoint(v)
	if err != nil {
		return 0, usagef("%s: %v", flagName, err)
	}
	if pt.Kind == export.AtStep {
		// a step names its entries: --from its first, --to its last
		w, err := m.StepWindow(pt.N, pt.N)
		if err != nil {
			return 0, usagef("%s: %v", flagName, err)
		}
		if flagName == "--from" {
			return w.Lo, nil
		}
		return w.Hi, nil
	}
	i, _, err := m.Resolve(pt)
	if err != nil {
		return 0, usagef("%s: %v", flagName, err)
	}
	return i, nil
}

// output is where an export goes: stdout, or a temporary file renamed to
// its name when the export succeeded (a failed export leaves no file).
type output struct {
	io.Writer
	name   string
	file   *os.File
	ctx    context.Context // an output of an interrupted command is not committed
	forget func()          // unregisters the temporary file (env.temp)
}

func openOutput(e *env, name, format string) (*output, error) {
	if name == "" || name == "-" {
		if ef := lookupFormat(format); ef != nil && ef.binary && term.IsTerminal(e.stdout) {
			return nil, usagef("export %s: the profile is binary; give -o FILE (or pipe it)", format)
		}
		if ef := lookupFormat(format); ef != nil && ef.binary {
			return &output{Writer: e.raw(), name: "stdout"}, nil
		}
		return &output{Writer: e.stdout, name: "stdout"}, nil
	}
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".tmp*")
	if err != nil {
		return nil, writeError(name, err)
	}
	if err := f.Chmod(0o644); err != nil { // CreateTemp makes it private
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return &output{Writer: ctxWriter{e.ctx, f}, name: name, file: f, ctx: e.ctx, forget: e.temp(f.Name())}, nil
}

// writeError names the file the user asked for, not the temporary file
// beside it that failed: "x.pb.gz: cannot write: no such file or directory".
func writeError(name string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("%s: cannot write: %w", input.Name(name), err)
}

func (o *output) commit() error {
	if o.file == nil {
		return nil
	}
	defer o.forget()
	if err := o.file.Close(); err != nil {
		os.Remove(o.file.Name())
		return err
	}
	if err := o.ctx.Err(); err != nil {
		os.Remove(o.file.Name())
		return err
	}
	if err := os.Rename(o.file.Name(), o.name); err != nil {
		os.Remove(o.file.Name())
		return err
	}
	return nil
}

func (o *output) abort() {
	if o.file != nil {
		o.file.Close()
		os.Remove(o.file.Name())
		o.forget()
	}
}
