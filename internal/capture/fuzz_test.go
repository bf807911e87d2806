package capture

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzReadBundle feeds arbitrary manifest.json and phases.jsonl/live.jsonl
// contents to ReadBundle: it must return data or an error, never panic.
func FuzzReadBundle(f *testing.F) {
	f.Add([]byte(`{"schema_version":1,"device_name":"H100","world_size":1}`), []byte(phaseLine+"\n"), []byte(`{"time_us":1,"allocated_bytes":2}`+"\n"))
	f.Add([]byte(`{"schema_version":1}`), []byte(`{"phase":"forward"`), []byte("\n\n{}\n"))
	f.Add([]byte(`{`), []byte(""), []byte(`{"time_us":"x"}`+"\n{}"))
	f.Fuzz(func(t *testing.T, manifest, phases, live []byte) {
		dir := t.TempDir()
		for name, data := range map[string][]byte{"manifest.json": manifest, "rank0/phases.jsonl": phases, "rank0/live.jsonl": live} {
			p := filepath.Join(dir, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		b, err := ReadBundle(dir)
		if err == nil && (len(b.Ranks) != 1 || b.Ranks[0].Rank != 0) {
			t.Fatalf("ranks %+v", b.Ranks)
		}
	})
}

// BenchmarkReadBundle reads a bundle with 200,000 phase records (a long run:
// 66,000 steps) and 20,000 live samples.
func BenchmarkReadBundle(b *testing.B) {
	dir := b.TempDir()
	writeFile := func(name, data string) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	var ph, lv strings.Builder
	names := []string{"forward", "backward", "optimizer"}
	for i := range 200000 {
		fmt.Fprintf(&ph, `{"phase":%q,"rank":0,"step":%d,"start_time_us":%d,"end_time_us":%d,"allocated_before_bytes":%d,"allocated_after_bytes":%d,"reserved_before_bytes":6366953472,"reserved_after_bytes":6366953472,"max_allocated_before_bytes":5673316352,"max_allocated_after_bytes":5673316352}`+"\n",
			names[i%3], i/3, 1795276567247676+int64(i)*10000, 1795276567257676+int64(i)*10000, 1565446144+i, 3613413888+i)
	}
	for i := range 20000 {
		fmt.Fprintf(&lv, `{"time_us":%d,"rank":0,"step":%d,"phase":"backward","allocated_bytes":%d,"reserved_bytes":6366953472,"max_allocated_bytes":5673316352,"max_reserved_bytes":6366953472,"device_used_bytes":7183597568,"device_total_bytes":85017493504,"host_rss_bytes":1321963520}`+"\n", 1795276567247676+int64(i)*1000000, i*3, 1565446144+i)
	}
	writeFile("manifest.json", `{"schema_version":1}`)
	writeFile("rank0/phases.jsonl", ph.String())
	writeFile("rank0/live.jsonl", lv.String())
	b.SetBytes(int64(ph.Len() + lv.Len()))
	b.ResetTimer()
	for range b.N {
		bd, err := ReadBundle(dir)
		if err != nil || len(bd.Ranks[0].Phases) != 200000 {
			b.Fatal(err)
		}
	}
}
