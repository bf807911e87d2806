package cli

import (
	"strings"

	"github.com/ptscope/ptscope/internal/export"
	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/snapshot"
)

// exportFormat is one format of ptscope export: its name and help, the
// inputs it takes (a snapshot's memory, a profiler trace, or many inputs
// into a folder) with the format-specific flags that apply to each, and
// its writers. A new format is one row of exportFormats and its writer in
// internal/export; the command's checks, messages and help follow from
// the table.
type exportFormat struct {
	name string
	help string // its paragraph of the usage text's "Formats:" list
	// snapshot writes the format from the memory of a snapshot's devices
	// (nil: it takes no snapshot); snapshotFlags are the flags of
	// formatFlags (and "steps") that apply then.
	snapshot      func(s *snapshot.Snapshot, ms []*export.Memory, out *output, f *exportFlags, set map[string]bool) (string, error)
	snapshotFlags []string
	oneDevice     bool // it exports one device: several need --device
	binary        bool // not for a terminal
	// trace copies a profiler trace in the format (nil: it takes none);
	// traceFlags as snapshotFlags.
	trace      func(e *env, path string, out *output, f *exportFlags, set map[string]bool) (string, error)
	traceFlags []string
	// many, when set, runs the format on many inputs into a folder.
	many func(e *env, format string, paths []string, f *exportFlags, pf *parquetFlags, set map[string]bool) error
}

// exportFormats are the formats of ptscope export, in the order of its
// help.
var exportFormats []*exportFormat

func init() {
	exportFormats = []*exportFormat{
		{name: "pprof", help: `  pprof       allocator memory as a pprof heap profile (go tool pprof -http,
              flame graph): inuse_space/inuse_objects at the peak (or --at),
              alloc_space/alloc_objects over the recording; Python frames as
              functions, category, stream and module as labels
`,
			snapshot: exportPProf, snapshotFlags: []string{"at"}, oneDevice: true, binary: true},
		{name: "folded", help: `  folded      folded stacks ("frame;frame;frame bytes") of the memory alive at
              the peak (or --at), for flamegraph.pl and speedscope
`,
			snapshot: exportFolded, snapshotFlags: []string{"at"}, oneDevice: true},
		{name: "perfetto", help: `  perfetto    Chrome trace JSON for ui.perfetto.dev and chrome://tracing: a
              snapshot's allocated and reserved memory (and by category) as
              counter tracks with steps and phases as slices; a profiler trace
              trimmed to --steps and --min-duration so that a huge trace opens
`,
			snapshot: exportPerfettoMemory, snapshotFlags: []string{"max-points"},
			trace: exportTrace, traceFlags: []string{"steps", "min-duration"}},
		{name: "memory-viz", help: `  memory-viz  a snapshot in the JSON form PyTorch's memory_viz opens
              (pytorch.org/memory_viz), trimmed to --steps or --from/--to and
              to allocations of --min-size, so that a snapshot too big for it
              opens; -o FILE.pickle writes it as a pickle (for python -m
              torch.cuda._memory_viz)
`,
			snapshot: exportMemViz, snapshotFlags: []string{"steps", "from", "to", "min-size"}},
		{name: "parquet", help: `  parquet     tables of every rank of snapshots, traces, bundles and folders
              of ranks (ranks, snapshots, steps, categories and modules at the
              peak, top stacks, operators, kernels, collectives, findings) into
              the folder -o DIR, for DuckDB and Spark (docs/parquet.md)
`,
			many: runExportParquet},
	}
}

// formatFlags are the flags that apply to some formats and inputs only
// (one kind of input each), in the order they are checked; "steps", which
// applies to two, is checked on its own.
var formatFlags = []string{"at", "from", "to", "min-size", "max-points", "min-duration"}

func lookupFormat(name string) *exportFormat {
	for _, f := range exportFormats {
		if f.name == name {
			return f
		}
	}
	return nil
}

// formatNames lists the formats for messages.
func formatNames() string {
	var names []string
	for _, f := range exportFormats {
		names = append(names, f.name)
	}
	return strings.Join(names, ", ")
}

// takes reports whether flag applies to the format with an input of kind
// (anything but a trace is read as a snapshot).
func (f *exportFormat) takes(flag string, kind input.Kind) bool {
	flags := f.snapshotFlags
	if kind == input.Trace {
		flags = f.traceFlags
	}
	for _, x := range flags {
		if x == flag {
			return true
		}
	}
	return false
}

// flagUse says which formats (space-separated) and kind of input a flag of
// formatFlags applies to.
func flagUse(flag string) (formats string, kind input.Kind) {
	var names []string
	for _, f := range exportFormats {
		for _, k := range []input.Kind{input.Snapshot, input.Trace} {
			if f.takes(flag, k) {
				names, kind = append(names, f.name), k
			}
		}
	}
	return strings.Join(names, " "), kind
}

// stepsUse says which formats --steps applies to.
func stepsUse() string {
	var parts []string
	for _, f := range exportFormats {
		switch {
		case f.takes("steps", input.Trace):
			parts = append(parts, f.name+" of a trace")
		case f.takes("steps", input.Snapshot):
			parts = append(parts, f.name)
		}
	}
	return strings.Join(parts, " and to ")
}

// traceFormats names the formats that export profiler traces.
func traceFormats() string {
	var names []string
	for _, f := range exportFormats {
		if f.trace != nil {
			names = append(names, f.name)
		}
	}
	return strings.Join(names, ", ")
}
