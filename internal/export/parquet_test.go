package export

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/ptscope/ptscope/internal/fleet"
	"github.com/ptscope/ptscope/internal/fleet/fleetgen"
	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/perf"
	"github.com/ptscope/ptscope/internal/testfixture"
)

func decompressed(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(testfixture.Testdata(t, "snapshots", name))
	if err != nil {
		t.Fatal(err)
	}
	r, err := input.NewSource(0, nil, nil).NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// exported writes 6 generated ranks (a real snapshot scaled per rank, a
// real OOM run as rank 4, synthetic FSDP traces) and a snapshot without a
// rank, exports them, and returns the tables' folder, the fleet report and
// every input's full results.
func exported(t *testing.T) (string, *fleet.Report, []*fleet.Loaded) {
	t.Helper()
	src := t.TempDir()
	o := fleetgen.Options{Ranks: 6, Snapshot: decompressed(t, "validate_gpt2tiny_fp32.pickle.xz"),
		Special: map[int][]byte{4: decompressed(t, "oom_capacity.pickle.xz")}, Traces: true, TraceSteps: 2}
	if _, err := fleetgen.Write(src, o); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(src, "baseline.pickle"), o.Snapshot, 0o644)
	found, err := fleet.Find(nil, []string{src}, input.Snapshot, input.Trace)
	if err != nil {
		t.Fatal(err)
	}
	in := found.WithUnranked()
	dir := filepath.Join(t.TempDir(), "tables")
	pq, err := NewParquet(dir, ParquetOptions{TopStacks: 7, RowGroupRows: 100})
	if err != nil {
		t.Fatal(err)
	}
	var all []*fleet.Loaded
	rep, err := fleet.Summarize(context.Background(), "export", in, fleet.Options{}, func(l *fleet.Loaded) error {
		all = append(all, l)
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
	if err != nil {
		t.Fatal(err)
	}
	if err := pq.AddFleet(rep); err != nil {
		t.Fatal(err)
	}
	tables, err := pq.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(tables) != len(ParquetTables) {
		t.Fatalf("%d tables", len(tables))
	}
	return dir, rep, all
}

func readTable[T any](t *testing.T, dir, name string) []T {
	t.Helper()
	rows, err := parquet.ReadFile[T](filepath.Join(dir, name))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return rows
}

// The tables read back (with parquet-go's reader) hold exactly the rows of
// the analyses, one per step, group, operator, kernel and finding, each
// with its rank.
func TestParquetReadBack(t *testing.T) {
	dir, rep, all := exported(t)
	var mems []*memory.Input
	var memRank []int
	var traces []*perf.Rank
	var traceRank []int
	for _, l := range all {
		if l.Memory != nil {
			for _, in := range l.Memory.Inputs {
				mems = append(mems, in)
				memRank = append(memRank, l.Rank)
			}
		}
		if l.Trace != nil {
			traces = append(traces, l.Trace)
			traceRank = append(traceRank, l.Rank)
		}
	}
	if len(mems) != 7 || len(traces) != 6 || memRank[0] != -1 {
		t.Fatalf("%d snapshots (ranks %v), %d traces", len(mems), memRank, len(traces))
	}

	ranks := readTable[PQRank](t, dir, "ranks.parquet")
	if len(ranks) != 7 || ranks[0].Rank != -1 || ranks[5].Rank != 4 {
		t.Fatalf("ranks %+v", ranks)
	}
	for _, r := range ranks[1:] {
		var m fleet.RankMemory
		for _, x := range rep.Memory.Ranks {
			if x.Rank == int(r.Rank) {
				m = x
			}
		}
		var tm fleet.RankTime
		for _, x := range rep.Time.Ranks {
			if x.Rank == int(r.Rank) {
				tm = x
			}
		}
		if *r.PeakAllocatedBytes != m.PeakAllocatedBytes || *r.Pattern != m.Pattern.String() || *r.AverageStepNS != tm.AverageStepNS ||
			*r.LateArrivals != int32(tm.LateArrivals) || *r.SnapshotPath != m.Path || *r.TracePath != tm.Path || r.Error != nil {
			t.Errorf("rank %d: %+v", r.Rank, r)
		}
	}
	if ranks[0].TracePath != nil || ranks[0].AverageStepNS != nil || ranks[0].PeakAllocatedBytes == nil {
		t.Errorf("the unranked snapshot: trace columns must be null: %+v", ranks[0])
	}
	if *ranks[5].OOMs != 1 {
		t.Errorf("rank 4 ran out of memory: %+v", ranks[5])
	}

	snaps := readTable[PQSnapshot](t, dir, "snapshots.parquet")
	steps := readTable[PQMemoryStep](t, dir, "memory_steps.parquet")
	groups := readTable[PQPeakGroup](t, dir, "peak_groups.parquet")
	stacks := readTable[PQPeakStack](t, dir, "peak_stacks.parquet")
	nSteps, nGroups, nStacks := 0, 0, 0
	for i, in := range mems {
		d := in.Devices[0]
		s := snaps[i]
		if s.Rank != int32(memRank[i]) || s.Path != in.Path || s.PeakAllocatedBytes != d.Peak.AllocatedBytes || s.Entries != int64(d.Entries) ||
			s.Pattern != d.Pattern.String() || s.OOMs != int32(len(d.OOMs)) || s.PeakTimeNS != d.Peak.TimeNS {
			t.Errorf("snapshot row %d: %+v", i, s)
		}
		for k, st := range d.Steps {
			row := steps[nSteps+k]
			if row.Rank != s.Rank || row.Step != int32(k) || row.DurationNS != st.DurationNS || row.PeakAllocatedBytes != st.PeakAllocatedBytes {
				t.Errorf("step row %+v, step %+v", row, st)
			}
		}
		nSteps += len(d.Steps)
		nGroups += len(d.Categories) + len(d.Groups) + len(d.Sources) + len(d.Modules)
		nStacks += min(len(d.Stacks), 7)
		var cats int64
		for _, g := range groups {
			if g.Rank == s.Rank && g.Path == s.Path && g.Kind == "category" {
				cats += g.Bytes
			}
		}
		var want int64
		for _, c := range d.Categories {
			want += c.Bytes
		}
		if cats != want {
			t.Errorf("rank %d: categories sum to %d, the result's to %d", s.Rank, cats, want)
		}
	}
	if len(snaps) != 7 || len(steps) != nSteps || len(groups) != nGroups || len(stacks) != nStacks {
		t.Errorf("rows: %d snapshots, %d/%d steps, %d/%d groups, %d/%d stacks", len(snaps), len(steps), nSteps, len(groups), nGroups, len(stacks), nStacks)
	}
	if s := stacks[0]; s.Position != 0 || s.Bytes < stacks[1].Bytes {
		t.Errorf("stack row %+v", s)
	}
	withUser := slices.IndexFunc(stacks, func(s PQPeakStack) bool {
		return s.UserFrame != "" && strings.Contains(s.Frames, s.UserFrame) && strings.Count(s.Frames, "\n") > 0
	})
	if withUser < 0 {
		t.Error("no stack row with its frames and the user's frame")
	}

	tsteps := readTable[PQTraceStep](t, dir, "trace_steps.parquet")
	ops := readTable[PQOperator](t, dir, "operators.parquet")
	kernels := readTable[PQKernel](t, dir, "kernels.parquet")
	colls := readTable[PQCollective](t, dir, "collectives.parquet")
	nt, no, nk, nc := 0, 0, 0, 0
	for i, r := range traces {
		for k, st := range r.Steps {
			row := tsteps[nt+k]
			if row.Rank != int32(traceRank[i]) || row.Name != st.Name || row.DurationNS != st.DurationNS || row.KernelNS != st.Breakdown.KernelNS {
				t.Errorf("trace step %+v, step %+v", row, st)
			}
		}
		for k, op := range r.Operators {
			if row := ops[no+k]; row.Rank != int32(traceRank[i]) || row.Name != op.Name || row.Calls != int64(op.Calls) || row.DeviceTotalNS != op.DeviceTotalNS {
				t.Errorf("operator %+v, %+v", row, op)
			}
		}
		nt, no, nk, nc = nt+len(r.Steps), no+len(r.Operators), nk+len(r.Kernels), nc+len(r.Comm.Collectives)
	}
	if len(tsteps) != nt || len(ops) != no || len(kernels) != nk || len(colls) != nc || nc == 0 {
		t.Errorf("rows: steps %d/%d, operators %d/%d, kernels %d/%d, collectives %d/%d", len(tsteps), nt, len(ops), no, len(kernels), nk, len(colls), nc)
	}

	fs := readTable[PQFinding](t, dir, "findings.parquet")
	want := len(rep.Findings)
	for _, in := range mems {
		want += len(in.Devices[0].Findings)
	}
	for _, r := range traces {
		want += len(r.Findings)
	}
	if len(fs) != want {
		t.Errorf("%d findings, want %d", len(fs), want)
	}
	var fleetIDs []string
	for _, f := range fs {
		if f.Source == "fleet" {
			fleetIDs = append(fleetIDs, f.ID)
			if f.Rank < 0 || f.Path != "" {
				t.Errorf("fleet finding %+v", f)
			}
		}
		if f.Source == "memory" && (f.Device == nil || f.Path == "") {
			t.Errorf("memory finding without device: %+v", f)
		}
	}
	if !slices.Contains(fleetIDs, "fleet-oom") {
		t.Errorf("fleet findings %v", fleetIDs)
	}
	for _, f := range fs {
		if f.ID == "fleet-oom" && (f.Rank != 4 || f.Numbers["ranks"] != 1) {
			t.Errorf("fleet-oom row %+v", f)
		}
	}
}

// The files use the types docs/parquet.md promises: int64 for bytes and
// ns, dictionary-encoded strings, zstd, a rank column in every table.
func TestParquetSchema(t *testing.T) {
	dir, _, _ := exported(t)
	for _, name := range ParquetTables {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		st, _ := f.Stat()
		pf, err := parquet.OpenFile(f, st.Size())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if pf.Schema().Fields()[0].Name() != "rank" {
			t.Errorf("%s: first column %q", name, pf.Schema().Fields()[0].Name())
		}
		groups := pf.Metadata().RowGroups
		if pf.NumRows() > 100 && len(groups) < 2 {
			t.Errorf("%s: %d rows in %d row groups (at most 100 rows each)", name, pf.NumRows(), len(groups))
		}
		for _, rg := range groups {
			for _, c := range rg.Columns {
				md := c.MetaData
				col := strings.Join(md.PathInSchema, ".")
				if md.Codec != format.Zstd {
					t.Errorf("%s %s: codec %v", name, col, md.Codec)
				}
				if (strings.HasSuffix(col, "_bytes") || strings.HasSuffix(col, "_ns")) && md.Type != format.Int64 {
					t.Errorf("%s %s: type %v", name, col, md.Type)
				}
				if md.Type == format.ByteArray && col != "message" && col != "recommendation" && col != "error" &&
					!strings.HasPrefix(col, "numbers") && !slices.Contains(md.Encoding, format.RLEDictionary) {
					t.Errorf("%s %s: string column without a dictionary (%v)", name, col, md.Encoding)
				}
			}
		}
		f.Close()
	}
	// no temporary file is left
	entries, _ := os.ReadDir(dir)
	if len(entries) != len(ParquetTables) {
		t.Errorf("%d files in the folder", len(entries))
	}
}

func TestParquetAbort(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "x")
	pq, err := NewParquet(dir, ParquetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pq.Abort()
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("left %d files", len(entries))
	}
	if _, err := NewParquet(filepath.Join(dir, "\x00"), ParquetOptions{}); err == nil {
		t.Error("a bad folder: no error")
	}
}
