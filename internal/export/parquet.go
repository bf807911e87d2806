package export

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/ptscope/ptscope/internal/finding"
	"github.com/ptscope/ptscope/internal/fleet"
	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/parquet"
	"github.com/ptscope/ptscope/internal/perf"
)

// ParquetOptions tune the Parquet export.
type ParquetOptions struct {
	// TopStacks is how many of the largest stacks at the peak each device
	// writes to peak_stacks.parquet (default DefaultTopStacks).
	TopStacks int
	// RowGroupRows bounds the rows of a row group, and so what a table
	// buffers before writing (default 128Ki).
	RowGroupRows int64
}

// DefaultTopStacks is the default of ParquetOptions.TopStacks.
const DefaultTopStacks = 50

// ParquetTables are the tables' file names, in docs/parquet.md's order.
var ParquetTables = []string{"ranks.parquet", "snapshots.parquet", "memory_steps.parquet", "peak_groups.parquet",
	"peak_stacks.parquet", "trace_steps.parquet", "operators.parquet", "kernels.parquet", "collectives.parquet",
	"findings.parquet"}

// Parquet writes the Parquet tables of any number of ranks into a folder,
// one input at a time: rows are buffered up to a row group per table and
// written as they come, so memory does not grow with the ranks. Every
// table is written, empty or not, so that the folders of many nodes read
// as one table with a glob. Files are written under temporary names and
// renamed by Close; Abort removes them.
type Parquet struct {
	dir  string
	o    ParquetOptions
	tabs []tableWriter

	ranks       *pqTable[PQRank]
	snapshots   *pqTable[PQSnapshot]
	memSteps    *pqTable[PQMemoryStep]
	groups      *pqTable[PQPeakGroup]
	stacks      *pqTable[PQPeakStack]
	traceSteps  *pqTable[PQTraceStep]
	operators   *pqTable[PQOperator]
	kernels     *pqTable[PQKernel]
	collectives *pqTable[PQCollective]
	findings    *pqTable[PQFinding]
}

// TableSummary says what one table file holds.
type TableSummary struct {
	Name  string
	Rows  int64
	Bytes int64
}

type tableWriter interface {
	close() (TableSummary, error)
	abort()
}

// pqTable is one table's file: its rows go to a parquet.Writer, which
// holds the current row group.
type pqTable[T any] struct {
	name, tmp, final string
	f                *os.File
	bw               *bufio.Writer
	w                *parquet.Writer[T]
	rows             int64
}

func newTable[T any](p *Parquet, name string) (*pqTable[T], error) {
	final := filepath.Join(p.dir, name)
	f, err := os.CreateTemp(p.dir, "."+name+".tmp*")
	if err != nil {
		return nil, err
	}
	t := &pqTable[T]{name: name, tmp: f.Name(), final: final, f: f, bw: bufio.NewWriter(f)}
	if t.w, err = parquet.NewWriter[T](t.bw, parquet.Options{RowGroupRows: p.o.RowGroupRows}); err != nil {
		t.abort()
		return nil, err
	}
	p.tabs = append(p.tabs, t)
	return t, nil
}

func (t *pqTable[T]) add(rows ...T) error {
	t.rows += int64(len(rows))
	if err := t.w.Write(rows); err != nil {
		return fmt.Errorf("%s: %w", t.final, err)
	}
	return nil
}

func (t *pqTable[T]) close() (TableSummary, error) {
	s := TableSummary{Name: t.name, Rows: t.rows}
	if err := t.w.Close(); err != nil {
		return s, fmt.Errorf("%s: %w", t.final, err)
	}
	if err := t.bw.Flush(); err != nil {
		return s, fmt.Errorf("%s: %w", t.final, err)
	}
	if err := t.f.Chmod(0o644); err != nil { // CreateTemp makes it private
		return s, err
	}
	if err := t.f.Close(); err != nil {
		return s, err
	}
	st, err := os.Stat(t.tmp)
	if err == nil {
		s.Bytes = st.Size()
		err = os.Rename(t.tmp, t.final)
	}
	return s, err
}

func (t *pqTable[T]) abort() {
	t.f.Close()
	os.Remove(t.tmp)
}

// NewParquet starts the tables in dir (created when missing).
func NewParquet(dir string, o ParquetOptions) (*Parquet, error) {
	if o.TopStacks <= 0 {
		o.TopStacks = DefaultTopStacks
	}
	if o.RowGroupRows <= 0 {
		o.RowGroupRows = 128 << 10
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	p := &Parquet{dir: dir, o: o}
	var err error
	open := func(f func() error) {
		if err == nil {
			err = f()
		}
	}
	open(func() (e error) { p.ranks, e = newTable[PQRank](p, "ranks.parquet"); return })
	open(func() (e error) { p.snapshots, e = newTable[PQSnapshot](p, "snapshots.parquet"); return })
	open(func() (e error) { p.memSteps, e = newTable[PQMemoryStep](p, "memory_steps.parquet"); return })
	open(func() (e error) { p.groups, e = newTable[PQPeakGroup](p, "peak_groups.parquet"); return })
	open(func() (e error) { p.stacks, e = newTable[PQPeakStack](p, "peak_stacks.parquet"); return })
	open(func() (e error) { p.traceSteps, e = newTable[PQTraceStep](p, "trace_steps.parquet"); return })
	open(func() (e error) { p.operators, e = newTable[PQOperator](p, "operators.parquet"); return })
	open(func() (e error) { p.kernels, e = newTable[PQKernel](p, "kernels.parquet"); return })
	open(func() (e error) { p.collectives, e = newTable[PQCollective](p, "collectives.parquet"); return })
	open(func() (e error) { p.findings, e = newTable[PQFinding](p, "findings.parquet"); return })
	if err != nil {
		p.Abort()
		return nil, err
	}
	return p, nil
}

// AddSnapshots writes the rows of one rank's analysed snapshots (an
// analyze document: one Input per snapshot).
func (p *Parquet) AddSnapshots(rank int, rep *memory.Report) error {
	r := int32(rank)
	for _, in := range rep.Inputs {
		for _, d := range in.Devices {
			dev := int32(d.Device)
			row := PQSnapshot{Rank: r, Path: in.Path, Format: in.Format, Device: dev, Entries: int64(d.Entries), HasHistory: d.HasHistory,
				FirstTimeNS: d.FirstTimeNS, LastTimeNS: d.LastTimeNS, PeakAllocatedBytes: d.Peak.AllocatedBytes,
				PeakReservedBytes: d.Peak.ReservedBytes, ReservedAtPeakBytes: d.Peak.ReservedAtPeakBytes, PeakTimeNS: d.Peak.TimeNS,
				PeakPhase: d.Peak.Phase.String(), PeakStep: int32(d.Peak.Step), EndAllocatedBytes: d.End.AllocatedBytes,
				EndReservedBytes: d.End.ReservedBytes, EfficiencyAtPeakRatio: d.Fragmentation.EfficiencyAtPeak, Pattern: d.Pattern.String(),
				Steps: int32(len(d.Steps)), OOMs: int32(d.OOMCount()), Truncated: d.Truncated}
			if d.Leak != nil {
				row.LeakPerStepBytes = d.Leak.PerStepBytes
			}
			if in.Bundle != nil {
				row.DeviceTotalBytes = in.Bundle.DeviceTotalBytes
			}
			if err := p.snapshots.add(row); err != nil {
				return err
			}
			for i, st := range d.Steps {
				if err := p.memSteps.add(PQMemoryStep{Rank: r, Path: in.Path, Device: dev, Step: int32(i), Name: st.Name, StartNS: st.StartNS,
					EndNS: st.EndNS, DurationNS: st.DurationNS, PeakAllocatedBytes: st.PeakAllocatedBytes,
					EndAllocatedBytes: st.EndAllocatedBytes, Partial: st.Partial, Outlier: st.Outlier}); err != nil {
					return err
				}
			}
			group := func(by string, name string, bytes int64, count int) error {
				return p.groups.add(PQPeakGroup{Rank: r, Path: in.Path, Device: dev, Kind: by, Name: name, Bytes: bytes, Count: int64(count)})
			}
			for _, c := range d.Categories {
				if err := group("category", c.Category.String(), c.Bytes, c.Count); err != nil {
					return err
				}
			}
			for _, gs := range []struct {
				by string
				gs []memory.Group
			}{{"group", d.Groups}, {"source", d.Sources}, {"module", d.Modules}} {
				for _, g := range gs.gs {
					if err := group(gs.by, g.Name, g.Bytes, g.Count); err != nil {
						return err
					}
				}
			}
			for i, s := range d.Stacks {
				if i == p.o.TopStacks {
					break
				}
				row := PQPeakStack{Rank: r, Path: in.Path, Device: dev, Position: int32(i), Bytes: s.Bytes, Count: int64(s.Count),
					Category: s.Category.String(), Source: s.Source, Frames: framesText(s.Frames)}
				if s.UserFrame >= 0 && s.UserFrame < len(s.Frames) {
					row.UserFrame = pqFrame(s.Frames[s.UserFrame])
				}
				if err := p.stacks.add(row); err != nil {
					return err
				}
			}
			for _, f := range d.Findings {
				if err := p.finding(rank, "memory", in.Path, &dev, f); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func pqFrame(f memory.Frame) string { return f.Filename + ":" + strconv.Itoa(f.Line) + " " + f.Name }

func framesText(fs []memory.Frame) string {
	var b strings.Builder
	for i, f := range fs {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(pqFrame(f))
	}
	return b.String()
}

// AddTrace writes the rows of one rank's analysed trace.
func (p *Parquet) AddTrace(rank int, t *perf.Rank) error {
	r := int32(rank)
	for _, st := range t.Steps {
		b, ph := st.Breakdown, st.Phases
		if err := p.traceSteps.add(PQTraceStep{Rank: r, Path: t.Path, Name: st.Name, Number: int32(st.Number), StartNS: st.StartTimeNS,
			DurationNS: st.DurationNS, HostDurationNS: st.HostDurationNS, GPUUtilizationRatio: st.UtilizationRatio, KernelNS: b.KernelNS,
			MemcpyNS: b.MemcpyNS, MemsetNS: b.MemsetNS, CommunicationNS: b.CommunicationNS, RuntimeNS: b.RuntimeNS,
			DataLoaderNS: b.DataLoaderNS, CPUExecNS: b.CPUExecNS, OtherNS: b.OtherNS, ForwardNS: ph.ForwardNS, BackwardNS: ph.BackwardNS,
			OptimizerNS: ph.OptimizerNS}); err != nil {
			return err
		}
	}
	for _, o := range t.Operators {
		if err := p.operators.add(PQOperator{Rank: r, Path: t.Path, Name: o.Name, InputShapes: o.InputShapes, Calls: int64(o.Calls),
			HostSelfNS: o.HostSelfNS, HostTotalNS: o.HostTotalNS, DeviceSelfNS: o.DeviceSelfNS, DeviceTotalNS: o.DeviceTotalNS,
			TensorCoreEligible: o.TensorCoreEligible, TensorCoreSelfNS: o.TensorCoreSelfNS}); err != nil {
			return err
		}
	}
	for _, k := range t.Kernels {
		if err := p.kernels.add(PQKernel{Rank: r, Path: t.Path, Name: k.Name, Calls: int64(k.Calls), TotalNS: k.TotalNS, MeanNS: k.MeanNS,
			MinNS: k.MinNS, MaxNS: k.MaxNS, MeanBlocksPerSM: k.MeanBlocksPerSM, MeanOccupancyRatio: k.MeanOccupancyRatio,
			TensorCore: k.TensorCore, Communication: k.Communication, TopOperator: k.TopOperator}); err != nil {
			return err
		}
	}
	for _, c := range t.Comm.Collectives {
		if err := p.collectives.add(PQCollective{Rank: r, Path: t.Path, Name: c.Name, Calls: int64(c.Calls), TotalNS: c.TotalNS, Bytes: c.Bytes}); err != nil {
			return err
		}
	}
	for _, f := range t.Findings {
		if err := p.finding(rank, "trace", t.Path, nil, f); err != nil {
			return err
		}
	}
	return nil
}

func (p *Parquet) finding(rank int, source, path string, dev *int32, f finding.Finding) error {
	row := PQFinding{Rank: int32(rank), Source: source, Path: path, Device: dev, ID: f.ID, Severity: f.Severity.String(),
		Message: f.Message, Recommendation: f.Recommendation, Numbers: f.Numbers}
	if row.Numbers == nil {
		row.Numbers = map[string]float64{}
	}
	return p.findings.add(row)
}

// AddFleet writes the fleet's rows: one per rank in ranks.parquet and the
// fleet's own findings.
func (p *Parquet) AddFleet(rep *fleet.Report) error {
	rows := map[int]*PQRank{}
	var order []int
	get := func(rank int) *PQRank {
		if rows[rank] == nil {
			rows[rank] = &PQRank{Rank: int32(rank)}
			order = append(order, rank)
		}
		return rows[rank]
	}
	if m := rep.Memory; m != nil {
		for _, x := range m.Ranks {
			row := get(x.Rank)
			row.SnapshotPath = ptr(x.Path)
			row.Snapshots = int32(x.Inputs)
			if x.Error != "" {
				row.Error = ptr(x.Error)
			}
			if x.PhasesOnly { // the peaks of its phases, nothing more
				row.PeakAllocatedBytes, row.PeakReservedBytes = ptr(x.PeakAllocatedBytes), ptr(x.PeakReservedBytes)
			}
			if x.Device < 0 {
				continue
			}
			row.PeakAllocatedBytes, row.PeakReservedBytes, row.EndAllocatedBytes = ptr(x.PeakAllocatedBytes), ptr(x.PeakReservedBytes), ptr(x.EndAllocatedBytes)
			row.EfficiencyAtPeakRatio = ptr(x.EfficiencyAtPeakRatio)
			if x.DeviceTotalBytes > 0 {
				row.DeviceTotalBytes = ptr(x.DeviceTotalBytes)
			}
			row.TopCategory, row.Pattern = ptr(x.TopCategory.String()), ptr(x.Pattern.String())
			row.LeakPerStepBytes = ptr(x.LeakPerStepBytes)
			row.OOMs, row.Truncated, row.MemorySteps = ptr(int32(x.OOMs)), ptr(x.Truncated), ptr(int32(x.Steps))
		}
	}
	if t := rep.Time; t != nil {
		for _, x := range t.Ranks {
			row := get(x.Rank)
			row.TracePath = ptr(x.Path)
			row.Traces = int32(x.Traces)
			if x.Error != "" && row.Error == nil {
				row.Error = ptr(x.Error)
			}
			if x.Traces == 0 {
				continue
			}
			row.TraceSteps, row.AverageStepNS, row.MedianStepNS = ptr(int32(x.Steps)), ptr(x.AverageStepNS), ptr(x.MedianStepNS)
			row.GPUUtilizationRatio, row.DataLoaderRatio = ptr(x.GPUUtilizationRatio), ptr(x.DataLoaderRatio)
			row.CommunicationNS, row.ExposedCommunicationNS = ptr(x.CommunicationNS), ptr(x.ExposedCommunicationNS)
			row.Collectives, row.LateArrivals = ptr(int32(x.Collectives)), ptr(int32(x.LateArrivals))
			if x.WorldSize > 0 {
				row.WorldSize = ptr(int32(x.WorldSize))
			}
		}
	}
	slices.Sort(order)
	for _, r := range order {
		if err := p.ranks.add(*rows[r]); err != nil {
			return err
		}
	}
	for _, f := range rep.Findings {
		rank := -1
		if f.At != nil && f.At.Rank != nil {
			rank = *f.At.Rank
		}
		if err := p.finding(rank, "fleet", "", nil, f); err != nil {
			return err
		}
	}
	return nil
}

// Close writes the tables' footers and moves them to their names.
func (p *Parquet) Close() ([]TableSummary, error) {
	var out []TableSummary
	for i, t := range p.tabs {
		s, err := t.close()
		if err != nil {
			for _, rest := range p.tabs[i:] {
				rest.abort()
			}
			return out, err
		}
		out = append(out, s)
	}
	return out, nil
}

// Abort removes the unfinished tables.
func (p *Parquet) Abort() {
	for _, t := range p.tabs {
		t.abort()
	}
}

func ptr[T any](v T) *T { return &v }
