package snapshot

import (
	"bytes"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/attack"
)

// FuzzRead reads any input as a snapshot, pickle or JSON, through the
// in-memory (checked as it arrives) and the streaming paths: never a panic
// or a hang, and a result whose ids all resolve. The corpus starts from the
// attack suite's small cases and the real fixtures.
func FuzzRead(f *testing.F) {
	seedSnapshotCorpus(f)
	f.Add([]byte(`{"segments": [{"device": 0, "address": 0, "total_size": 512, "blocks": [{"size": 512, "state": "active_allocated", "frames": [{"filename": "a.py", "line": 1, "name": "f"}]}]}], "device_traces": [[{"action": "alloc", "addr": 0, "size": 512, "frames": [{"filename": "a.py", "line": 1, "name": "f"}]}]]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, workers := range []int{0, 2} {
			s, err := read(bytes.NewReader(data), 0, workers)
			if err != nil {
				if strings.Contains(err.Error(), "\n") {
					t.Fatalf("error of several lines: %q", err)
				}
				continue
			}
			for _, tr := range s.Traces {
				n := tr.Len()
				if len(tr.Addr) != n || len(tr.Size) != n || len(tr.Stack) != n || len(tr.TimeUS) != n || len(tr.Stream) != n {
					t.Fatal("ragged trace columns")
				}
				for i := 0; i < n; i++ {
					if int(tr.Stack[i]) >= len(s.Stacks) || int(tr.Stream[i]) >= len(s.Streams) ||
						int(tr.CompileContext[i]) >= len(s.Strings) || int(tr.UserMetadata[i]) >= len(s.Strings) {
						t.Fatalf("entry %d: an id out of range", i)
					}
				}
				if tr.Invalid.Count > 0 && tr.Invalid.First == "" {
					t.Fatal("invalid entries without a description")
				}
			}
			for _, st := range s.Stacks {
				for _, fr := range st {
					if int(fr) >= len(s.Frames) {
						t.Fatal("a stack's frame out of range")
					}
				}
			}
			for _, g := range s.Segments {
				for _, b := range g.Blocks {
					if int(b.Stack) >= len(s.Stacks) {
						t.Fatal("a block's stack out of range")
					}
				}
			}
		}
	})
}

// seedSnapshotCorpus adds the attack suite's small snapshot cases and the
// first 64 KiB of every real fixture to a snapshot fuzz target's corpus.
func seedSnapshotCorpus(f *testing.F) {
	for _, c := range attack.Cases() {
		if c.Small && c.Command == "analyze" {
			f.Add(c.Make())
		}
	}
	for _, data := range fixtureBytes(f) {
		if len(data) > 1<<16 {
			data = data[:1<<16]
		}
		f.Add(data)
	}
}
