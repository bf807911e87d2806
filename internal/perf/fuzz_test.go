package perf

import (
	"bytes"
	"context"
	"testing"

	"github.com/ptscope/ptscope/internal/kineto"
	"github.com/ptscope/ptscope/internal/kineto/gen"
)

// FuzzAnalyze: whatever trace the reader accepts, the analysis finishes
// without a panic and keeps its invariants (breakdown and phases sum to
// each step, utilisation + idle = 1).
//
//	go test ./internal/perf -run - -fuzz FuzzAnalyze -fuzztime 60s -fuzzminimizetime 2s
//
// (the default minimisation spends a minute on each new large input)
func FuzzAnalyze(f *testing.F) {
	for _, name := range []string{"ddp1", "fsdp", "dataloader"} {
		s := gen.Scenarios(1)[name]
		s.Steps, s.Layers = 1, 1
		var b bytes.Buffer
		s.Write(&b)
		f.Add(b.Bytes())
	}
	f.Add([]byte(`[{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 5, "dur": 1, "args": {"device": 0, "stream": 7}}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := kineto.Read(context.Background(), bytes.NewReader(data), kineto.Options{Workers: 1})
		if err != nil || tr == nil {
			return
		}
		r := Analyze(tr, Options{})
		for _, s := range r.Steps {
			p := s.Phases
			if s.Breakdown.Total() != s.DurationNS || p.ForwardNS+p.BackwardNS+p.OptimizerNS+p.DataLoadingNS+p.OtherNS != s.DurationNS {
				t.Fatalf("step %s does not add up: %+v", s.Name, s)
			}
		}
		if r.PrimaryDevice >= 0 && r.Idle.SpanNS > 0 {
			if d := r.GPUUtilizationRatio + r.Idle.IdleRatio - 1; d > 1e-9 || d < -1e-9 {
				t.Fatalf("utilization %g + idle %g", r.GPUUtilizationRatio, r.Idle.IdleRatio)
			}
		}
		Compare([]*Rank{r})
	})
}
