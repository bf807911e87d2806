package snapgen_test

import (
	"bytes"
	"testing"

	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/snapshot"
	"github.com/ptscope/ptscope/internal/snapshot/snapgen"
)

func TestGeneratedSnapshotReads(t *testing.T) {
	var buf bytes.Buffer
	if err := snapgen.Write(&buf, snapgen.Options{Entries: 30000, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	s, err := snapshot.Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	tr := s.Trace(0)
	if tr.Len() != 30000 {
		t.Errorf("entries = %d, want 30000", tr.Len())
	}
	if len(s.Frames) > 120 || len(s.Stacks) > 61 || len(s.Frames) < 50 {
		t.Errorf("frames %d stacks %d: interning broken", len(s.Frames), len(s.Stacks))
	}
	if len(s.Segments) != 2 || len(s.Segments[0].Blocks) != 401 {
		t.Errorf("segments %d", len(s.Segments))
	}
	for i := 0; i < tr.Len(); i++ {
		if tr.Stack[i] == 0 {
			t.Fatalf("entry %d lost its stack", i)
		}
	}
}

func BenchmarkRead1M(b *testing.B) {
	var buf bytes.Buffer
	if err := snapgen.Write(&buf, snapgen.Options{Entries: 1_000_000, Seed: 1}); err != nil {
		b.Fatal(err)
	}
	data := buf.Bytes()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s, err := snapshot.Read(bytes.NewReader(data))
		if err != nil || s.Trace(0).Len() != 1_000_000 {
			b.Fatal(err)
		}
	}
}

// The GPT-2 small model is what its comment says: GPT-2 small's 124,439,808
// fp32 parameters, AdamW's two states of each from the first step on,
// steps of 3,159 entries found from the optimizer's frames, and final
// segments that hold exactly the blocks the trace leaves alive.
func TestGPT2SmallShape(t *testing.T) {
	var buf bytes.Buffer
	if err := snapgen.Write(&buf, snapgen.Options{Entries: 40_000, Seed: 1, Model: snapgen.ModelGPT2Small}); err != nil {
		t.Fatal(err)
	}
	s, err := snapshot.Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if n := s.Trace(0).Len(); n > 40_000 || n < 40_000-4 {
		t.Fatalf("%d entries, want 40,000 (up to the last operation that fits)", n)
	}
	a := memory.Analyze(s, 0, memory.Options{})
	r := a.Result
	const params = 124_439_808 * 4
	cat := map[memory.Category]int64{}
	for _, g := range r.Categories {
		cat[g.Category] = g.Bytes
	}
	if cat[memory.CatParameter] != params || cat[memory.CatOptimizerState] != 2*params {
		t.Errorf("at the peak parameters %d B, optimizer state %d B; want %d and %d", cat[memory.CatParameter], cat[memory.CatOptimizerState], params, 2*params)
	}
	// batch 8 x 512: activations and the four logits-sized loss tensors
	if r.Peak.AllocatedBytes < 8<<30 || r.Peak.AllocatedBytes > 10<<30 || cat[memory.CatActivation] < 4<<30 {
		t.Errorf("peak %d B with %d B of activations; want 8-10 GiB, most of it activations", r.Peak.AllocatedBytes, cat[memory.CatActivation])
	}
	if r.StepSource != memory.StepsOptimizerFrames || r.Pattern != memory.PatternStable {
		t.Errorf("steps from %v, pattern %v; want optimizer frames, stable", r.StepSource, r.Pattern)
	}
	full := 0
	for _, st := range r.Steps[1:] { // the first step also builds the model and AdamW's state
		if st.Partial {
			continue
		}
		full++
		n := 0 // entries besides the allocator's new segments
		for i := st.StartIndex; i < st.EndIndex; i++ {
			if s.Trace(0).Action[i] != snapshot.ActionSegmentAlloc {
				n++
			}
		}
		if n != 3159 {
			t.Errorf("%s: %d entries besides segment_alloc, want 3,159", st.Name, n)
		}
	}
	if full < 10 {
		t.Errorf("%d full steps in 40,000 entries", full)
	}
	if r.UnmatchedFrees != 0 || r.GhostBlocks != 0 || a.Replay.End.Allocated != a.Replay.Timeline.Allocated[len(a.Replay.Timeline.Allocated)-1] ||
		a.Replay.End.Reserved != a.Replay.Timeline.Reserved[len(a.Replay.Timeline.Reserved)-1] || a.Replay.Timeline.Reserved[0] <= 0 {
		t.Errorf("final segments disagree with the trace: unmatched %d, ghosts %d, end %+v, replayed allocated %d reserved %d..%d", r.UnmatchedFrees, r.GhostBlocks,
			a.Replay.End, a.Replay.Timeline.Allocated[len(a.Replay.Timeline.Allocated)-1], a.Replay.Timeline.Reserved[0], a.Replay.Timeline.Reserved[len(a.Replay.Timeline.Reserved)-1])
	}
}
