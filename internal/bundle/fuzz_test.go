package bundle

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

// FuzzReadRoles feeds arbitrary tensors.jsonl contents to ReadBundle and
// looks up addresses in what it read: data or an error, never a panic.
func FuzzReadRoles(f *testing.F) {
	f.Add([]byte(`{"time_us":10,"at":"step_end","tensors":[{"kind":"parameter","name":"w","ptr":4096,"bytes":1024}]}` + "\n"))
	f.Add([]byte(`{"time_us":20,"at":"step_end","part":0,"parts":2,"tensors":[{"kind":"gradient","ptr":1,"bytes":-5}]}` + "\n" +
		`{"time_us":20,"at":"step_end","part":1,"parts":2,"tensors":[]}` + "\n" + `{"region":"ddp_buckets","start_time_us":1}`))
	f.Add([]byte(`{"time_us":20,"at":"x","part":3,"parts":2}` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		p := filepath.Join(dir, "rank0", "tensors.jsonl")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(`{"schema_version":1}`), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		b, err := ReadBundle(dir)
		if err != nil {
			return
		}
		r := &b.Ranks[0]
		for _, inv := range r.Inventories {
			for _, x := range inv.Tensors {
				for _, addr := range []int64{x.Ptr, x.Ptr + x.Bytes - 1, x.Ptr - 1} {
					for _, got := range r.InventoryAt(inv.TimeUs).Lookup(addr) {
						if addr < got.Ptr || addr >= got.Ptr+got.Bytes {
							t.Fatalf("Lookup(%d) returned %+v", addr, got)
						}
					}
				}
			}
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
