package snapshot

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/ptscope/ptscope/internal/testfixture"
	"github.com/ulikunitz/xz"
)

// fixture returns the path of a shared fixture (skips when absent).
func fixture(t testing.TB, name string) string { return testfixture.Path(t, name) }

func TestReadTrainFixture(t *testing.T) {
	s, err := ReadFile(fixture(t, "gpt2s_train_fp32_b4_ctx512.pickle"))
	if err != nil {
		t.Fatal(err)
	}
	// Facts from the fixtures README.
	if len(s.Segments) != 132 {
		t.Errorf("segments = %d, want 132", len(s.Segments))
	}
	tr := s.Trace(0)
	if tr.Len() != 9477 {
		t.Fatalf("trace entries = %d, want 9477", tr.Len())
	}
	counts := map[Action]int{}
	for _, a := range tr.Action {
		counts[a]++
	}
	for _, a := range []Action{ActionAlloc, ActionFreeRequested, ActionFreeCompleted} {
		if counts[a] != 3159 {
			t.Errorf("%s = %d, want 3159", a, counts[a])
		}
	}
	if len(s.Annotations) != 12 || !strings.HasPrefix(s.Annotations[0].Name, "Optimizer.step#") || s.Annotations[0].Stage != "START" {
		t.Errorf("annotations = %d, first %+v", len(s.Annotations), s.Annotations[0])
	}
	if !tr.HasTime || tr.TimeUS[0] != 1795272504665726 || tr.Addr[0] != 140135473610752 || tr.Size[0] != 6291456 {
		t.Errorf("first entry: time %d addr %d size %d", tr.TimeUS[0], tr.Addr[0], tr.Size[0])
	}
	// 69 unique frames and 36 unique non-empty stacks by content (counted
	// with Python over entries, segments and blocks), interned once each.
	if len(s.Frames) != 69 || len(s.Stacks) != 37 {
		t.Errorf("frames = %d, stacks = %d; want 69 and 36+1", len(s.Frames), len(s.Stacks))
	}
	f := s.StackFrames(tr.Stack[5])
	if len(f) == 0 || f[0].Name != "embedding" || !strings.HasSuffix(f[0].Filename, "torch/nn/functional.py") || f[0].Line != 2567 {
		t.Errorf("stack of entry 5 = %+v", f)
	}
	if s.Settings.MaxSplitSize != -1 || s.Settings.ExpandableSegments || len(s.Settings.All) != 9 {
		t.Errorf("settings = %+v", s.Settings)
	}
	// At dump time memory_allocated was 1,564,872,704 B (fixtures README).
	var active int64
	for _, g := range s.Segments {
		var sum int64
		for _, b := range g.Blocks {
			sum += b.Size
			if b.State == BlockActiveAllocated {
				active += b.Size
			}
		}
		if sum != g.TotalSize {
			t.Errorf("segment %x: blocks sum to %d, total %d", g.Address, sum, g.TotalSize)
		}
	}
	if active != 1564872704 {
		t.Errorf("active_allocated bytes = %d, want 1564872704", active)
	}
}

func TestReadCppStacks(t *testing.T) {
	s, err := ReadFile(fixture(t, "gpt2tiny_train_bf16_cppstacks.pickle"))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Segments) != 30 || s.Trace(0).Len() != 2802 || len(s.Frames) != 511 || len(s.Stacks) != 111 {
		t.Errorf("segments %d entries %d frames %d stacks %d; want 30, 2802, 511, 110+1", len(s.Segments), s.Trace(0).Len(), len(s.Frames), len(s.Stacks))
	}
	f := s.StackFrames(s.Trace(0).Stack[0])
	if len(f) != 80 || f[0].Name != "torch::unwind::unwind()" {
		t.Errorf("first stack has %d frames, first %+v", len(f), f[0])
	}
}

// The same snapshot as JSON (the form MemoryViz accepts) and gzip-compressed
// must give the same model.
func TestJSONAndGzipMatchPickle(t *testing.T) {
	p := fixture(t, "gpt2s_fwd_bf16_b4_ctx512.pickle")
	want, err := ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	js := toJSON(t, want)
	got, err := Read(bytes.NewReader(js))
	if err != nil {
		t.Fatal(err)
	}
	compare(t, "json", want, got)

	raw, _ := os.ReadFile(p)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(raw)
	zw.Close()
	tmp := filepath.Join(t.TempDir(), "snap.pickle.gz")
	os.WriteFile(tmp, gz.Bytes(), 0o644)
	got2, err := ReadFile(tmp)
	if err != nil {
		t.Fatal(err)
	}
	compare(t, "gzip", want, got2)
	if !strings.Contains(got2.Format, "gzip") {
		t.Errorf("format = %q", got2.Format)
	}
}

func compare(t *testing.T, what string, want, got *Snapshot) {
	t.Helper()
	if len(got.Segments) != len(want.Segments) || got.Trace(0).Len() != want.Trace(0).Len() {
		t.Fatalf("%s: %d segments %d entries, want %d %d", what, len(got.Segments), got.Trace(0).Len(), len(want.Segments), want.Trace(0).Len())
	}
	wt, gt := want.Trace(0), got.Trace(0)
	for i := 0; i < wt.Len(); i++ {
		if wt.Action[i] != gt.Action[i] || wt.Addr[i] != gt.Addr[i] || wt.Size[i] != gt.Size[i] || wt.TimeUS[i] != gt.TimeUS[i] {
			t.Fatalf("%s: entry %d differs", what, i)
		}
		wf, gf := want.StackFrames(wt.Stack[i]), got.StackFrames(gt.Stack[i])
		if len(wf) != len(gf) || (len(wf) > 0 && wf[0] != gf[0]) {
			t.Fatalf("%s: entry %d stack differs", what, i)
		}
	}
	for i := range want.Segments {
		if len(want.Segments[i].Blocks) != len(got.Segments[i].Blocks) || want.Segments[i].TotalSize != got.Segments[i].TotalSize {
			t.Fatalf("%s: segment %d differs", what, i)
		}
	}
}

// toJSON writes a snapshot back out in the snapshot JSON schema.
func toJSON(t *testing.T, s *Snapshot) []byte {
	frames := func(id StackID) []map[string]any {
		out := []map[string]any{}
		for _, f := range s.StackFrames(id) {
			out = append(out, map[string]any{"filename": f.Filename, "line": f.Line, "name": f.Name})
		}
		return out
	}
	var segs []map[string]any
	for _, g := range s.Segments {
		var blocks []map[string]any
		for _, b := range g.Blocks {
			blocks = append(blocks, map[string]any{"address": b.Address, "size": b.Size, "requested_size": b.RequestedSize, "state": b.State.String(), "frames": frames(b.Stack)})
		}
		segs = append(segs, map[string]any{"device": g.Device, "address": g.Address, "total_size": g.TotalSize,
			"allocated_size": g.AllocatedSize, "active_size": g.ActiveSize, "requested_size": g.RequestedSize,
			"stream": s.Streams[g.Stream], "segment_type": g.Type, "segment_pool_id": g.Pool, "is_expandable": g.Expandable, "blocks": blocks})
	}
	var traces [][]map[string]any
	for _, tr := range s.Traces {
		var es []map[string]any
		for i := 0; i < tr.Len(); i++ {
			es = append(es, map[string]any{"action": tr.Action[i].String(), "addr": tr.Addr[i], "size": tr.Size[i],
				"stream": s.Streams[tr.Stream[i]], "time_us": tr.TimeUS[i], "frames": frames(tr.Stack[i])})
		}
		traces = append(traces, es)
	}
	b, err := json.Marshal(map[string]any{"segments": segs, "device_traces": traces})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A device whose trace holds only the marker _snapshot() records (a real
// ptscope run bundle from an H200 x2 host that used one GPU) is no device.
func TestDevicesIgnoreSnapshotMarker(t *testing.T) {
	s, err := ReadFile(testfixture.Testdata(t, "bundles", "lm_small_bf16", "rank0", "snapshot_end.pickle"))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Traces) != 2 || s.Trace(1).Len() != 1 || s.Trace(1).Action[0] != ActionSnapshot {
		t.Fatalf("fixture shape changed: %d traces", len(s.Traces))
	}
	if d := s.Devices(); len(d) != 1 || d[0] != 0 {
		t.Errorf("Devices() = %v, want [0]", d)
	}
}

// The PyTorch 1.13/2.0 forms, made from a real snapshot by
// scripts/make_legacy_snapshot.py: a bare list of segments (protocol 2),
// blocks with `history` instead of address/requested_size, the
// `active_awaiting_free` spelling, segments without the newer keys.
func TestLegacySnapshot(t *testing.T) {
	modern, err := ReadFile(testfixture.Testdata(t, "snapshots", "validate_gpt2tiny_fp32.pickle.xz"))
	if err != nil {
		t.Fatal(err)
	}
	legacy, err := ReadFile(testfixture.Testdata(t, "snapshots", "legacy_list_history.pickle.xz"))
	if err != nil {
		t.Fatal(err)
	}
	if !legacy.Legacy || len(legacy.Traces) != 0 || len(legacy.Segments) != len(modern.Segments) {
		t.Fatalf("legacy=%v traces=%d segments=%d (modern %d)", legacy.Legacy, len(legacy.Traces), len(legacy.Segments), len(modern.Segments))
	}
	var pendingBlocks int
	for i, g := range legacy.Segments {
		var wantRequested int64 // legacy segments lack requested_size: derived from the blocks
		m := modern.Segments[i]
		if g.Address != m.Address || g.TotalSize != m.TotalSize || len(g.Blocks) != len(m.Blocks) {
			t.Fatalf("segment %d differs", i)
		}
		for j, b := range g.Blocks {
			mb := m.Blocks[j]
			// Addresses are recomputed from the segment and sizes; requested
			// sizes and stacks come from history[0].
			if b.Address != mb.Address || b.Size != mb.Size {
				t.Errorf("segment %d block %d: address/size %x/%d, want %x/%d", i, j, b.Address, b.Size, mb.Address, mb.Size)
			}
			switch b.State {
			case BlockActivePendingFree:
				pendingBlocks++
				if mb.State != BlockActiveAllocated {
					t.Errorf("awaiting_free block was %v", mb.State)
				}
			case BlockActiveAllocated:
				wantRequested += mb.RequestedSize
				if b.RequestedSize != mb.RequestedSize || len(legacy.StackFrames(b.Stack)) != len(modern.StackFrames(mb.Stack)) {
					t.Errorf("block %d/%d: requested %d (want %d) or stack lost", i, j, b.RequestedSize, mb.RequestedSize)
				}
			}
		}
		if g.RequestedSize != wantRequested {
			t.Errorf("segment %d: requested size %d, want %d", i, g.RequestedSize, wantRequested)
		}
	}
	if pendingBlocks != 2 {
		t.Errorf("%d active_awaiting_free blocks read as pending, want 2", pendingBlocks)
	}
}

// Snapshots compressed with xz and zstd read like the plain pickle.
func TestCompressedSnapshots(t *testing.T) {
	p := fixture(t, "gpt2s_fwd_bf16_b4_ctx512.pickle")
	want, err := ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(p)
	dir := t.TempDir()
	for name, w := range map[string]func(io.Writer) (io.WriteCloser, error){
		"s.pickle.zst": func(w io.Writer) (io.WriteCloser, error) { return zstd.NewWriter(w) },
		"s.pickle.xz":  func(w io.Writer) (io.WriteCloser, error) { return xz.NewWriter(w) },
	} {
		var buf bytes.Buffer
		zw, err := w(&buf)
		if err != nil {
			t.Fatal(err)
		}
		zw.Write(raw)
		zw.Close()
		os.WriteFile(filepath.Join(dir, name), buf.Bytes(), 0o644)
		got, err := ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		compare(t, name, want, got)
	}
}
