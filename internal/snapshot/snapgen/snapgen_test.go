package snapgen_test

import (
	"bytes"
	"testing"

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
