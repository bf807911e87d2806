package cli

import (
	"flag"
	"fmt"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/ptscope/ptscope/internal/export"
	"github.com/ptscope/ptscope/internal/fleet"
	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/load"
	"github.com/ptscope/ptscope/internal/term"
	"github.com/ptscope/ptscope/internal/units"
)

// parquetFlags are the flags of export parquet alone.
type parquetFlags struct {
	topStacks int
	jobs      int
}

func (p *parquetFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&p.topStacks, "top-stacks", export.DefaultTopStacks, "parquet: the largest `N` stacks at the peak of each snapshot device in peak_stacks.parquet")
	fs.IntVar(&p.jobs, "jobs", 0, "parquet: inputs read at once (default: the number of CPUs)")
}

// any reports whether a parquet-only flag was given.
func (p *parquetFlags) any(set map[string]bool) bool { return set["top-stacks"] || set["jobs"] }

// runExportParquet writes the Parquet tables of every input under paths
// into the folder -o names. Inputs are read in parallel with memory flat in
// their number (internal/fleet); inputs without a rank get rank -1.
func runExportParquet(e *env, format string, paths []string, f *exportFlags, pf *parquetFlags, set map[string]bool) error {
	if format != "parquet" {
		return usagef("export %s: --top-stacks and --jobs apply to parquet", format)
	}
	for _, name := range []string{"at", "steps", "from", "to", "min-size", "min-duration", "max-points"} {
		if set[name] {
			return usagef("export parquet: --%s does not apply (it exports every step and the peak)", name)
		}
	}
	if len(paths) == 0 {
		return usagef("export parquet: give snapshots, traces, bundles or folders of ranks")
	}
	if f.output == "" || f.output == "-" {
		return usagef("export parquet: give the output folder with -o DIR (one .parquet file per table)")
	}
	if pf.topStacks <= 0 {
		return usagef("export parquet: --top-stacks must be positive")
	}
	found, err := fleet.Find(e.source(), paths, input.Snapshot, input.Trace)
	if err != nil {
		return err
	}
	in := found.WithUnranked()
	if set["rank"] {
		in = &fleet.Inputs{Files: in.Of(f.rank)}
	}
	if len(in.Files) == 0 {
		return usagef("export parquet: no snapshot or trace found in %s", strings.Join(paths, ", "))
	}
	var so load.SnapshotOptions
	if f.device >= 0 {
		so.Devices = []int{f.device}
	}
	pq, err := export.NewParquet(f.output, export.ParquetOptions{TopStacks: pf.topStacks})
	if err != nil {
		return err
	}
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	p := term.StartProgress(e.stderr, "export parquet")
	rep, err := fleet.Summarize(e.ctx, "export", in, fleet.Options{Workers: pf.jobs, Snapshot: so, Source: e.source(),
		Progress: func(done, total int) { p.SetLabel(fmt.Sprintf("export parquet: %d of %d inputs", done, total)) }},
		func(l *fleet.Loaded) error {
			if l.Memory != nil {
				if err := pq.AddSnapshots(l.Rank, l.Memory); err != nil {
					return err
				}
			}
			if l.Trace != nil {
				return pq.AddTrace(l.Rank, l.Trace)
			}
			return nil
		})
	p.Stop()
	if err == nil {
		err = pq.AddFleet(rep)
	}
	if err != nil {
		pq.Abort()
		return err
	}
	tables, err := pq.Close()
	if err != nil {
		return err
	}
	var parts []string
	var total int64
	for _, t := range tables {
		total += t.Bytes
		if t.Rows > 0 {
			parts = append(parts, fmt.Sprintf("%s %s", strings.TrimSuffix(t.Name, ".parquet"), units.Count(t.Rows)))
		}
	}
	fmt.Fprintf(e.stderr, "wrote %s: %d tables, %s, %s from %s; rows: %s\n", filepath.Clean(f.output), len(tables),
		units.Bytes(total), units.Plural(rep.Ranks, "rank", "ranks"), units.Plural(rep.Inputs, "input", "inputs"), strings.Join(parts, ", "))
	for _, x := range rep.Errors {
		fmt.Fprintf(e.stderr, "ptscope: rank %d: %s\n", x.Rank, x.Error)
	}
	if n := len(rep.Errors); n > 0 {
		return fmt.Errorf("%d of %d inputs could not be read; the tables hold the others", n, rep.Inputs)
	}
	return nil
}
