package memory

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/snapshot"
)

// FuzzAnalyzeTrace builds snapshots the decoders accept but no allocator
// writes (frees without allocs, addresses reused while alive, segment
// frees beyond what is reserved, OOM entries, times going back, stacks of
// every kind) and checks that every analysis finishes, keeps its
// invariants and marshals.
func FuzzAnalyzeTrace(f *testing.F) {
	f.Add([]byte{1, 0, 8, 2, 0, 8, 3, 0, 8})
	f.Add([]byte{4, 1, 200, 1, 1, 9, 9, 2, 7, 3, 1, 9, 5, 1, 200})
	f.Add(bytes.Repeat([]byte{1, 3, 40, 2, 3, 40, 3, 3, 40, 1, 4, 30}, 20))
	f.Fuzz(func(t *testing.T, data []byte) {
		s := fuzzSnapshot(data)
		// roles, peak readings and a process limit from the same bytes, at
		// addresses in and around the trace's blocks
		var o Options
		o.DeviceMemory = 1 << 30
		for i := 0; i+2 < len(data); i += 7 {
			at := int64(1_700_000_000_000_000+int64(data[i+1])*int64(i)) * 1000
			o.Roles = append(o.Roles, Role{Address: 0x7f0000000000 + uint64(data[i])*(1<<16), TimeNS: at,
				Category: Category(data[i+2] % uint8(numCategories)), Module: "m"})
			o.PeakMarks = append(o.PeakMarks, PeakMark{TimeNS: at, MaxAllocatedBytes: int64(data[i+2]) << 20})
		}
		if len(data) > 0 {
			o.AllowedBytes = int64(data[0]) << 20
		}
		for _, d := range s.Devices() {
			a := Analyze(s, d, o).Result
			var sum int64
			for _, c := range a.Categories {
				sum += c.Bytes
			}
			if sum != a.Peak.AllocatedBytes {
				t.Fatalf("categories sum to %d, peak %d", sum, a.Peak.AllocatedBytes)
			}
			if _, err := json.Marshal(a); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// fuzzSnapshot turns bytes into a snapshot: triples of (action, address
// slot, size), a few stacks with Python, C++ and no frames, and final
// segments holding whatever the trace left alive.
func fuzzSnapshot(data []byte) *snapshot.Snapshot {
	s := &snapshot.Snapshot{Strings: []string{""}, Streams: []int64{0},
		Frames: []snapshot.Frame{{Filename: "/home/u/train.py", Line: 3, Name: "step"},
			{Filename: "/venv/site-packages/torch/optim/adam.py", Line: 9, Name: "_init_group"},
			{Filename: "??", Name: "torch::autograd::generated::MmBackward0::apply()"},
			{Filename: "/venv/site-packages/torch/nn/modules/module.py", Line: 1, Name: "forward"}},
		Stacks: [][]snapshot.FrameID{{}, {0}, {1, 0}, {2}, {3, 0}}}
	tr := snapshot.Trace{HasTime: len(data)%2 == 0}
	live := map[uint64]int64{}
	var t int64 = 1_700_000_000_000_000
	for i := 0; i+2 < len(data); i += 3 {
		act := snapshot.Action(data[i] % 10)
		addr := 0x7f0000000000 + uint64(data[i+1]%16)*(1<<20)
		size := int64(data[i+2]) * 4096
		if data[i]&0x80 != 0 {
			t -= 5 // times may go back
		}
		t += int64(data[i+1])
		tr.Action = append(tr.Action, act)
		tr.Addr = append(tr.Addr, addr)
		tr.Size = append(tr.Size, size)
		tr.Stream = append(tr.Stream, 0)
		tr.TimeUS = append(tr.TimeUS, t)
		tr.Stack = append(tr.Stack, snapshot.StackID(data[i+2]%5))
		tr.CompileContext = append(tr.CompileContext, 0)
		tr.UserMetadata = append(tr.UserMetadata, 0)
		switch act {
		case snapshot.ActionAlloc:
			live[addr] = size
		case snapshot.ActionFreeRequested, snapshot.ActionFreeCompleted:
			delete(live, addr)
		}
	}
	s.Traces = []snapshot.Trace{tr}
	seg := snapshot.Segment{Address: 0x7f0000000000, TotalSize: 16 << 20, Type: "large"}
	var used int64
	for slot := uint64(0); slot < 16; slot++ {
		addr := seg.Address + slot*(1<<20)
		if size, ok := live[addr]; ok && size > 0 && size <= 1<<20 {
			seg.Blocks = append(seg.Blocks, snapshot.Block{Address: addr, Size: size, RequestedSize: size,
				State: snapshot.BlockActiveAllocated, Stack: snapshot.StackID(slot % 5)})
			used += size
		}
	}
	seg.Blocks = append(seg.Blocks, snapshot.Block{Address: seg.Address + 16<<20 - 4096, Size: 4096, State: snapshot.BlockInactive})
	seg.AllocatedSize = used
	s.Segments = []snapshot.Segment{seg}
	return s
}

// FuzzAnalyzeFile analyses whatever the snapshot decoder accepts, seeded
// with the committed real snapshots.
func FuzzAnalyzeFile(f *testing.F) {
	for _, name := range []string{"oom_capacity.pickle.xz", "oom_fragmentation.pickle.xz", "legacy_list_history.pickle.xz"} {
		fh, err := os.Open(filepath.Join("..", "..", "testdata", "snapshots", name))
		if err != nil {
			f.Fatal(err)
		}
		r, err := input.NewSource(0, nil, nil).NewReader(fh)
		if err != nil {
			f.Fatal(err)
		}
		data, err := io.ReadAll(r)
		fh.Close()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], 1)
	f.Add(append([]byte{0x80, 0x02}, n[:]...))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := snapshot.Read(bytes.NewReader(data))
		if err != nil {
			return
		}
		for _, d := range s.Devices() {
			if _, err := json.Marshal(Analyze(s, d, Options{}).Result); err != nil {
				t.Fatal(err)
			}
		}
	})
}
