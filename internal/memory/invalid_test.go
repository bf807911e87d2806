package memory

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/finding"
	"github.com/ptscope/ptscope/internal/snapshot"
)

// TestInvalidEntriesFinding: a snapshot with a size written as a str gets
// the invalid-entries finding with the count and the first entry, and a
// valid one does not.
func TestInvalidEntriesFinding(t *testing.T) {
	doc := func(badSize string) string {
		var b strings.Builder
		b.WriteString(`{"segments": [{"device": 0, "address": 1048576, "total_size": 2097152, "blocks": [{"size": 2097152, "state": "inactive"}]}], "device_traces": [[`)
		for i := 0; i < 10; i++ {
			size := "512"
			if i == 4 && badSize != "" {
				size = badSize
			}
			fmt.Fprintf(&b, `{"action": "alloc", "addr": %d, "size": %s, "stream": 0, "time_us": %d}, `, 1048576+512*i, size, 2*i)
			fmt.Fprintf(&b, `{"action": "free_completed", "addr": %d, "size": 512, "stream": 0, "time_us": %d}`, 1048576+512*i, 2*i+1)
			if i < 9 {
				b.WriteString(", ")
			}
		}
		b.WriteString("]]}")
		return b.String()
	}
	for _, c := range []struct {
		bad  string
		want bool
	}{{"", false}, {`"512"`, true}} {
		s, err := snapshot.Read(strings.NewReader(doc(c.bad)))
		if err != nil {
			t.Fatal(err)
		}
		res := Analyze(s, 0, Options{}).Result
		var got bool
		for _, f := range res.Findings {
			if f.ID != "invalid-entries" {
				continue
			}
			got = true
			if f.Numbers["invalid_entries"] != 1 || f.Numbers["entries"] != 20 || *f.At.EventIndex != 8 ||
				!strings.Contains(f.Message, "1 of 20 trace entries are malformed (first: device_traces[0][8]: size is a str)") {
				t.Errorf("finding: %+v", f)
			}
		}
		if got != c.want {
			t.Errorf("bad size %q: finding %v, want %v", c.bad, got, c.want)
		}
	}
}

// TestImpossiblePeakFinding: a free of an address the trace never
// allocated, claiming a TiB, within 2 MiB of reserved memory, makes a peak
// the allocator cannot have: an invalid-entries warning says so (it was
// reported as a 1 TiB peak, the "allocated before recording" info only).
func TestImpossiblePeakFinding(t *testing.T) {
	s, err := snapshot.Read(strings.NewReader(`{"segments": [{"device": 0, "address": 1073741824, "total_size": 2097152, "blocks": [{"size": 2097152, "state": "inactive"}]}], "device_traces": [[` +
		`{"action": "alloc", "addr": 1073741824, "size": 512, "stream": 0, "time_us": 1}, ` +
		`{"action": "free_completed", "addr": 7696581394432, "size": 1099511627776, "stream": 0, "time_us": 2}]]}`))
	if err != nil {
		t.Fatal(err)
	}
	res := Analyze(s, 0, Options{}).Result
	for _, f := range res.Findings {
		if f.ID == "invalid-entries" {
			if f.Severity != finding.Warning || !strings.Contains(f.Message, "the peak of 1.00 TiB allocated is more than the 2.00 MiB ever reserved") {
				t.Errorf("finding: %+v", f)
			}
			return
		}
	}
	t.Fatalf("no invalid-entries finding; peak %+v", res.Peak)
}
