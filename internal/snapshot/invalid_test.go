package snapshot

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/snapshot/snapgen"
)

// jsonSnapshot writes a JSON snapshot of n alloc/free pairs on device 0;
// field may replace the JSON text of a field of entry i.
func jsonSnapshot(n int, field func(i int, key string) string) []byte {
	return snapgen.JSONSnapshot(n, 1000, "[]", field)
}

// TestInvalidEntriesCounted: fields of the wrong type and impossible values
// are counted with the first one described; most of them invalid is refused.
func TestInvalidEntriesCounted(t *testing.T) {
	for _, c := range []struct {
		name  string
		field func(i int, key string) string
		count int
		first string
	}{
		{"valid", nil, 0, ""},
		{"size as str", func(i int, k string) string {
			if k == "size" && i%10 == 3 {
				return `"512"`
			}
			return ""
		}, 4, "device_traces[0][3]: size is a str"},
		{"size as float", func(i int, k string) string {
			if k == "size" && i == 5 {
				return "512.5"
			}
			return ""
		}, 1, "device_traces[0][5]: size is a float"},
		{"negative size", func(i int, k string) string {
			if k == "size" && i == 6 {
				return "-4096"
			}
			return ""
		}, 1, "device_traces[0][6]: alloc of size -4096"},
		{"addr as null", func(i int, k string) string {
			if k == "addr" && i == 7 {
				return "null"
			}
			return ""
		}, 1, "device_traces[0][7]: addr is a None"},
		{"time goes back", func(i int, k string) string {
			if k == "time_us" && i == 9 {
				return "10"
			}
			return ""
		}, 1, "device_traces[0][9]: time_us 10 is before the previous entry's 1008"},
		{"action as int", func(i int, k string) string {
			if k == "action" && i == 2 {
				return "1"
			}
			return ""
		}, 1, "device_traces[0][2]: action is a int"},
		// Absurd numbers (issue 28): read as 0, not summed.
		{"size 2^62", func(i int, k string) string {
			if k == "size" && i == 4 {
				return "4611686018427387904"
			}
			return ""
		}, 1, "device_traces[0][4]: alloc of size 4611686018427387904, more than any device holds (read as 0)"},
		{"block past the address space", func(i int, k string) string {
			if k == "addr" && i == 4 {
				return "18446744073709551500"
			}
			return ""
		}, 1, "device_traces[0][4]: alloc of 512 bytes at 0xffffffffffffff8c runs past the end of the address space (read as size 0)"},
		{"alloc at a held address", func(i int, k string) string {
			if k == "addr" && i == 2 {
				return "1048576" // entry 0's, not freed until entry 1... freed: entry 2 takes it again after its free
			}
			if k == "addr" && i == 4 {
				return "1048576" // held by entry 2
			}
			return ""
		}, 1, "device_traces[0][4]: alloc at 0x100000, which the trace allocated before with no free between (read as an unknown action)"},
	} {
		s, err := Read(bytes.NewReader(jsonSnapshot(20, c.field)))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		iv := s.Trace(0).Invalid
		if iv.Count != c.count || iv.First != c.first {
			t.Errorf("%s: %d invalid, first %q; want %d, %q", c.name, iv.Count, iv.First, c.count, c.first)
		}
	}
	// Most entries invalid: refused.
	_, err := Read(bytes.NewReader(jsonSnapshot(20, func(i int, k string) string {
		if k == "size" && i%4 != 0 {
			return `"big"`
		}
		return ""
	})))
	if err == nil || !strings.Contains(err.Error(), "30 of 40 trace entries are invalid (first: device_traces[0][1]: size is a str)") {
		t.Fatalf("mostly invalid: %v", err)
	}
	// A list item that is no entry at all.
	s, err := Read(strings.NewReader(`{"segments": [], "device_traces": [[{"action": "alloc", "addr": 1, "size": 512}, 7, {"action": "free_completed", "addr": 1, "size": 512}]]}`))
	if err != nil || s.Trace(0).Invalid.Count != 1 || s.Trace(0).Invalid.First != "device_traces[0][1] is a int, expected a dict" {
		t.Fatalf("non-dict entry: %v %+v", err, s.Trace(0).Invalid)
	}
}

func TestInvalidSegmentsCounted(t *testing.T) {
	s, err := Read(strings.NewReader(`{"segments": [{"device": 0, "address": 0, "total_size": 1024, "blocks": [{"size": "512", "state": "active_allocated"}, {"size": 512, "state": "inactive"}]}, {"device": 0, "address": 4096, "total_size": 512, "blocks": [{"size": 512, "state": "inactive"}]}], "device_traces": []}`))
	if err != nil {
		t.Fatal(err)
	}
	if iv := s.InvalidSegments; iv.Count != 1 || iv.First != "segments[0].blocks[0]: size is a str" {
		t.Fatalf("%+v", iv)
	}
	// Blocks that add up to more than the segment, sizes above it.
	s, err = Read(strings.NewReader(`{"segments": [{"device": 0, "address": 0, "total_size": 2097152, "allocated_size": 4294967296, "blocks": [{"size": 1048576, "state": "inactive"}, {"size": 2147483648, "state": "inactive"}]}, {"device": 0, "address": 4194304, "total_size": 4611686018427387904, "blocks": []}, {"device": 0, "address": 8388608, "total_size": 512, "blocks": [{"size": 512, "state": "inactive"}]}, {"device": 0, "address": 9388608, "total_size": 512, "blocks": [{"size": 512, "state": "inactive"}]}], "device_traces": []}`))
	if err != nil {
		t.Fatal(err)
	}
	g := s.Segments
	if iv := s.InvalidSegments; iv.Count != 3 || iv.First != "segments[0]: allocated_size 4294967296 is more than its total_size 2097152 (read as the total)" {
		t.Errorf("%+v", iv)
	}
	if g[0].AllocatedSize != 2097152 || len(g[0].Blocks) != 1 || g[1].TotalSize != 0 {
		t.Errorf("segments read as %+v", g[:2])
	}
	_, err = Read(strings.NewReader(`{"segments": [{"device": 0, "address": "x", "total_size": -1, "blocks": []}], "device_traces": []}`))
	if err == nil || !strings.Contains(err.Error(), "1 of 1 segments and blocks are invalid (first: segments[0]: address is a str)") {
		t.Fatalf("mostly invalid segments: %v", err)
	}
}

// TestInvalidParallelMatchesSequential: the parallel reader leaves entries
// with a field of the wrong type to the general decoder, so both readers
// count them alike (and the rest of the result is the same).
func TestInvalidParallelMatchesSequential(t *testing.T) {
	var buf bytes.Buffer
	if err := snapgen.Write(&buf, snapgen.Options{Entries: 30_000, Seed: 3, StrSizeEvery: 997}); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	want, err := sequential(data)
	if err != nil {
		t.Fatal(err)
	}
	iv := want.Trace(0).Invalid
	if iv.Count != 30 || !strings.HasSuffix(iv.First, "][996]: size is a str") {
		t.Fatalf("sequential: %+v", iv)
	}
	for _, w := range []int{1, 2, 4} {
		got, _, err := parallelRead(data, w)
		if err != nil {
			t.Fatal(err)
		}
		got.InputBytes = want.InputBytes
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("workers %d: %s differs", w, diff(got, want))
		}
	}
}
