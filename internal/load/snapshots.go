package load

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ptscope/ptscope/internal/bundle"
	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/snapshot"
	"github.com/ptscope/ptscope/internal/spillmem"
	"github.com/ptscope/ptscope/internal/units"
)

// SnapshotOptions control how snapshots are loaded and analysed.
type SnapshotOptions struct {
	Memory memory.Options
	// Devices, when set, limits the analysis to these device ordinals;
	// nil analyses every device with data.
	Devices []int
	// AfterRead, when set, runs after each snapshot is decoded and before
	// it is analysed (the CLI collects the decoder's garbage there).
	AfterRead func()
	// Progress, when set, is told what is being read ("reading x (2 of 5)").
	Progress func(label string)
	// Ranks, when set, limits bundles to these ranks (--rank).
	Ranks []int
	// SpillAbove is the estimated decoded size from which a snapshot
	// file's trace columns, and the analysis's, are spilled to a
	// temporary file with bounded resident memory (snapshot.ReadOptions):
	// 0 means a quarter of the memory budget, -1 never.
	SpillAbove int64
	// Notify, when set, is told when a snapshot is spilled.
	Notify func(msg string)
	// Source is where the inputs are found and opened, and the memory
	// budget they are read within (nil: the default budget).
	Source *input.Source
}

// SnapshotSet is the analyze document of a set of inputs together with the
// models behind it.
type SnapshotSet struct {
	Report *memory.Report
	// Inputs[i] holds the models behind Report.Inputs[i].
	Inputs []*SnapshotInput

	arenas []*spillmem.Arena // of the spilled snapshots (Close)
}

// Close releases the temporary files and mappings of the snapshots that
// were spilled (SnapshotOptions.SpillAbove) and drops the models: the
// Report stays valid, Inputs is nil afterwards. Without Close they last
// as long as the process, which suits a command that reads its inputs
// once; one that reads many (a fleet) closes each set when done with it.
func (set *SnapshotSet) Close() error {
	var errs []error
	for _, a := range set.arenas {
		errs = append(errs, a.Close())
	}
	set.arenas, set.Inputs = nil, nil
	return errors.Join(errs...)
}

// SnapshotInput is the model of one input: the decoded snapshot and, per
// analysed device, the analysis (its Result is the same pointer as the
// report's Devices entry).
type SnapshotInput struct {
	Path     string
	Snapshot *snapshot.Snapshot // nil when unreadable or when a bundle rank has no snapshot
	Devices  []*memory.Analysis
	Bundle   *bundle.Bundle // the ptscope run bundle it came from; nil for a bare snapshot
	Rank     *bundle.Rank   // the bundle's rank
}

// Snapshots finds the snapshots and ptscope run bundles under paths (files
// or folders, searched by content) and analyses every device of each. A
// file that cannot be read is reported in its Input's Error and in the
// returned error; the others are still analysed, so the set is returned
// with the error. It returns a nil set only when nothing could be found.
func Snapshots(ctx context.Context, paths []string, o SnapshotOptions) (*SnapshotSet, error) {
	o.Source = input.Or(o.Source)
	files, err := o.Source.Find(paths, input.Snapshot, input.Bundle)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no snapshots found in %s", strings.Join(paths, ", "))
	}
	set := &SnapshotSet{Report: memory.NewReport()}
	var errs []error
	for k, file := range files {
		if err := ctx.Err(); err != nil {
			return set, err
		}
		if o.Progress != nil {
			label := "reading " + file.Path
			if len(files) > 1 {
				label += fmt.Sprintf(" (%d of %d)", k+1, len(files))
			}
			o.Progress(label)
		}
		switch file.Kind {
		case input.Bundle:
			err = set.addBundle(ctx, file.Path, o)
		case input.Trace:
			err = fmt.Errorf("%s: offset 0: a Kineto profiler trace, not an allocator snapshot: read it with ptscope trace", file.Path)
		case input.Timeline:
			if !o.Source.IsMemoryTimeline(file.Path) {
				err = set.addFile(file.Path, o, o.Memory, nil, nil) // a JSON array of arrays: the reader says what is wrong
				break
			}
			err = fmt.Errorf("%s: offset 0: %s, not an allocator snapshot: ptscope analyze reads allocator snapshots (torch.cuda.memory._dump_snapshot)", file.Path, input.TimelineWhat)
		default:
			err = set.addFile(file.Path, o, o.Memory, nil, nil)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	set.Report.Compare()
	return set, errors.Join(errs...)
}

// SnapshotBytes analyses one snapshot held in memory (compressed or not),
// named name in the report.
func SnapshotBytes(ctx context.Context, name string, data []byte, o SnapshotOptions) (*SnapshotSet, error) {
	set := &SnapshotSet{Report: memory.NewReport()}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	o.Source = input.Or(o.Source)
	err := set.add(name, func() (*snapshot.Snapshot, error) {
		r, err := o.Source.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, err
		}
		defer r.Close()
		s, err := snapshot.ReadWith(r, snapshot.ReadOptions{Source: o.Source})
		if err != nil {
			return nil, err
		}
		if r.Compression != input.None {
			s.Format += " (" + string(r.Compression) + ")"
		}
		return s, nil
	}, o, o.Memory, nil, nil)
	set.Report.Compare()
	return set, err
}

// addFile reads and analyses one snapshot file, spilled when large.
func (set *SnapshotSet) addFile(path string, o SnapshotOptions, mo memory.Options, b *bundle.Bundle, r *bundle.Rank) error {
	var a *spillmem.Arena
	err := set.add(path, func() (*snapshot.Snapshot, error) {
		a = spillArena(path, o)
		if a != nil {
			set.arenas = append(set.arenas, a)
		}
		return snapshot.ReadFileWith(path, snapshot.ReadOptions{Arena: a, Source: o.Source})
	}, o, mo, b, r)
	if a != nil && a.Err() != nil && o.Notify != nil {
		// e.g. a full disk: what did not fit in the file was kept in memory
		o.Notify(fmt.Sprintf("%s: %v: the rest of it was kept in memory", input.Name(path), a.Err()))
	}
	return err
}

// add reads a snapshot with read and appends its input and models. A panic
// (a bug) becomes an error naming the input.
func (set *SnapshotSet) add(path string, read func() (*snapshot.Snapshot, error), o SnapshotOptions, mo memory.Options,
	b *bundle.Bundle, r *bundle.Rank) (err error) {
	in := &memory.Input{Path: path, Devices: []*memory.Result{}}
	m := &SnapshotInput{Path: path, Bundle: b, Rank: r}
	set.Report.Inputs = append(set.Report.Inputs, in)
	set.Inputs = append(set.Inputs, m)
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%s: internal error: %v (please report it)", path, p)
			in.Devices, m.Devices = []*memory.Result{}, nil
		}
		if err != nil {
			in.Error = err.Error()
		}
	}()
	s, err := read()
	if err != nil {
		return err
	}
	if o.AfterRead != nil {
		o.AfterRead()
	}
	m.Snapshot = s
	in.Format, in.Bytes = s.Format, s.InputBytes
	for _, d := range s.Devices() {
		if o.Devices != nil && !contains(o.Devices, d) {
			continue
		}
		a := memory.Analyze(s, d, mo)
		in.Devices = append(in.Devices, a.Result)
		m.Devices = append(m.Devices, a)
	}
	return nil
}

func contains(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// The snapshot reader's columnar model of the trace and the analysis's
// timelines take about 100 bytes per trace entry, about the size of the
// pickle. A snapshot whose estimated decoded size is above
// o.SpillAbove (default: a quarter of the memory budget) is read and
// analysed with those columns in a spill arena: a temporary file mapped
// into memory, of which at most spillResident bytes stay resident.
const spillResident = 64 << 20

// spillMin, when set (tests), places even small slices in the arena.
var spillMin int64

// spillArena returns the arena to read path into, or nil for the heap.
// The arena lives until the set is closed: the set's models point into it.
func spillArena(path string, o SnapshotOptions) *spillmem.Arena {
	above := o.SpillAbove
	if above < 0 {
		return nil
	}
	if above == 0 {
		above = input.Or(o.Source).Budget() / 4
	}
	n := decodedSize(path)
	if n <= above {
		return nil
	}
	a, err := spillmem.New("", spillResident)
	if err == nil && spillMin > 0 {
		a.SetMin(spillMin)
	}
	if err != nil {
		if o.Notify != nil {
			o.Notify(fmt.Sprintf("%s: %v: read into memory", input.Name(path), err))
		}
		return nil
	}
	if o.Notify != nil {
		o.Notify(fmt.Sprintf("%s: about %s decoded, more than %s: its trace is spilled to a temporary file, with bounded memory%s",
			input.Name(path), units.Bytes(n), thresholdNote(input.Or(o.Source), o.SpillAbove, above), tempNote()))
	}
	return a
}

// decodedSize estimates the decoded size of a snapshot file: its size, or
// eight times that when compressed; -1 when unknown (a pipe).
func decodedSize(path string) int64 { return expandedSize(path, 8) }
