package fleetgen

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"

	kgzip "github.com/klauspost/compress/gzip"

	"github.com/ptscope/ptscope/internal/kineto/gen"
)

// Options describe a generated fleet.
type Options struct {
	Ranks int
	// Snapshot is a real snapshot pickle (decompressed) that every rank
	// gets, scaled; nil writes no snapshots.
	Snapshot []byte
	// Special gives some ranks another snapshot, unscaled (a run that
	// leaked or ran out of memory).
	Special map[int][]byte
	// Traces writes one synthetic FSDP trace per rank (gzip).
	Traces bool
	// TraceSteps is the steps per trace (default 4).
	TraceSteps int
	Seed       uint64
	// Sizes and SlowData, when set, replace Plan's outliers and
	// stragglers: the size factor of some ranks, and the ranks whose data
	// loading is 3x slower.
	Sizes    map[int]float64
	SlowData []int
}

// Rank is what one generated rank got.
type Rank struct {
	Rank       int
	Size, Time Scale // the snapshot's factors (One for a special rank)
	Special    bool
	// DataLoaderNS is the trace's data loading per step.
	DataLoaderNS int64
}

// Layout: DIR/rankN/snapshot.pickle and DIR/rankN/rankN.pt.trace.json.gz.
const (
	SnapshotName = "snapshot.pickle"
)

// TraceName is the trace file name of rank r.
func TraceName(r int) string { return fmt.Sprintf("rank%d.pt.trace.json.gz", r) }

// Plan returns each rank's factors: sizes and times within about 1% of the
// source for most ranks, rank 0 holding 25% more memory (ranks often keep
// extra state on rank 0), every 250th rank from 137 on 40% more and every
// 500th from 333 on 20% less (outliers), and a slow data loader (3x) on
// every 200th rank from 77 on (stragglers); Options.Sizes and SlowData
// replace these.
func Plan(o Options) []Rank {
	rng := rand.New(rand.NewPCG(o.Seed, 13))
	out := make([]Rank, o.Ranks)
	for r := range out {
		size := 1 + rng.NormFloat64()*0.008
		time := 1 + rng.NormFloat64()*0.01
		switch {
		case o.Sizes != nil:
			if f, ok := o.Sizes[r]; ok {
				size = f
			}
		case r == 0:
			size = 1.25
		case r%250 == 137:
			size = 1.40
		case r%500 == 333:
			size = 0.80
		}
		dl := int64(300_000 + rng.IntN(30_000))
		if (o.SlowData == nil && r%200 == 77) || slices.Contains(o.SlowData, r) {
			dl *= 3
		}
		_, special := o.Special[r]
		out[r] = Rank{Rank: r, Size: ScaleOf(size), Time: ScaleOf(time), Special: special, DataLoaderNS: dl}
		if special {
			out[r].Size, out[r].Time = One, One
		}
	}
	return out
}

// Write writes the fleet under dir (which must exist) and returns the plan.
func Write(dir string, o Options) ([]Rank, error) {
	if o.TraceSteps <= 0 {
		o.TraceSteps = 4
	}
	plan := Plan(o)
	var buf bytes.Buffer
	for _, p := range plan {
		rd := filepath.Join(dir, fmt.Sprintf("rank%d", p.Rank))
		if err := os.MkdirAll(rd, 0o755); err != nil {
			return nil, err
		}
		if o.Snapshot != nil {
			buf.Reset()
			if s, ok := o.Special[p.Rank]; ok {
				buf.Write(s)
			} else if err := ScaleSnapshot(&buf, o.Snapshot, p.Size, p.Time); err != nil {
				return nil, err
			}
			if err := os.WriteFile(filepath.Join(rd, SnapshotName), buf.Bytes(), 0o644); err != nil {
				return nil, err
			}
		}
		if o.Traces {
			if err := writeTrace(filepath.Join(rd, TraceName(p.Rank)), p, o); err != nil {
				return nil, err
			}
		}
	}
	return plan, nil
}

func writeTrace(path string, p Rank, o Options) error {
	s := gen.Scenarios(0)["fsdp"]
	s.Rank, s.WorldSize, s.Steps = p.Rank, o.Ranks, o.TraceSteps
	s.DataLoaderNS = p.DataLoaderNS
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	zw, _ := kgzip.NewWriterLevel(f, kgzip.BestSpeed)
	bw := bufio.NewWriterSize(zw, 1<<16)
	_, err = s.Write(bw)
	for _, e := range []error{bw.Flush(), zw.Close(), f.Close()} {
		if err == nil {
			err = e
		}
	}
	return err
}
