package bundle

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t testing.TB, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

const phaseLine = `{"phase":"forward","rank":1,"step":4,"start_time_us":100,"end_time_us":250,"allocated_before_bytes":10,"allocated_after_bytes":30,"reserved_before_bytes":64,"reserved_after_bytes":96,"max_allocated_before_bytes":40,"max_allocated_after_bytes":50}`

func TestReadBundle(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "manifest.json"), `{"schema_version":1,"name":"x","device_name":"NVIDIA H100 80GB HBM3","device_total_memory_bytes":85017493504,"world_size":2,"simulated":false,"ranks":[]}`)
	writeFile(t, filepath.Join(dir, "rank1", "phases.jsonl"), phaseLine+"\n"+`{"phase":"backw`) // torn last line
	writeFile(t, filepath.Join(dir, "rank1", "live.jsonl"), `{"time_us":5,"rank":1,"step":2,"phase":"backward","allocated_bytes":7,"device_used_bytes":9,"host_rss_bytes":11}`+"\n")
	for _, f := range []string{"snapshot_end.pickle", "snapshot_step20.pickle", "snapshot_step3.pickle", "snapshot_oom.pickle", "snapshot_signal1_step7.pickle", "trace_step12.pt.trace.json.gz", "trace_step6.pt.trace.json.gz", ".tmp1_x.pickle"} {
		writeFile(t, filepath.Join(dir, "rank1", f), "x")
	}
	writeFile(t, filepath.Join(dir, "rank1", "oom.json"), `{"requested_bytes":123,"step":3,"phase":"backward","snapshot":"snapshot_oom.pickle"}`)
	writeFile(t, filepath.Join(dir, "rank0", "process.json"), `{"rank":0,"device_name":"NVIDIA H100 80GB HBM3","steps":9,"max_allocated_bytes":5673316352,"world_size":2}`)
	writeFile(t, filepath.Join(dir, "rankX", "phases.jsonl"), "garbage") // not a rank folder: ignored

	b, err := ReadBundle(dir)
	if err != nil {
		t.Fatal(err)
	}
	if b.Manifest.DeviceName != "NVIDIA H100 80GB HBM3" || b.Manifest.DeviceTotalMemoryBytes != 85017493504 || b.Manifest.WorldSize != 2 || b.Manifest.Simulated {
		t.Errorf("manifest %+v", b.Manifest)
	}
	if len(b.Ranks) != 2 || b.Ranks[0].Rank != 0 || b.Ranks[1].Rank != 1 {
		t.Fatalf("ranks %+v", b.Ranks)
	}
	r0, r1 := b.Ranks[0], b.Ranks[1]
	if r0.Info.Steps != 9 || r0.Info.MaxAllocatedBytes != 5673316352 || *r0.Info.WorldSize != 2 {
		t.Errorf("rank0 info %+v", r0.Info)
	}
	want := Phase{Name: "forward", Rank: 1, Step: 4, StartTimeUs: 100, EndTimeUs: 250, AllocatedBeforeBytes: 10, AllocatedAfterBytes: 30,
		ReservedBeforeBytes: 64, ReservedAfterBytes: 96, MaxAllocatedBeforeBytes: 40, MaxAllocatedAfterBytes: 50}
	if len(r1.Phases) != 1 || r1.Phases[0] != want {
		t.Errorf("phases %+v", r1.Phases)
	}
	if len(r1.Live) != 1 || r1.Live[0].Phase != "backward" || r1.Live[0].DeviceUsedBytes != 9 || r1.Live[0].HostRSSBytes != 11 {
		t.Errorf("live %+v", r1.Live)
	}
	var names []string
	for _, s := range r1.Snapshots {
		names = append(names, filepath.Base(s))
	}
	if got := strings.Join(names, " "); got != "snapshot_step3.pickle snapshot_step20.pickle snapshot_signal1_step7.pickle snapshot_oom.pickle snapshot_end.pickle" {
		t.Errorf("snapshot order: %s", got)
	}
	if len(r1.Traces) != 2 || filepath.Base(r1.Traces[0]) != "trace_step6.pt.trace.json.gz" {
		t.Errorf("traces %q", r1.Traces)
	}
	if r1.OOM == nil || r1.OOM.RequestedBytes != 123 || r1.OOM.Phase != "backward" {
		t.Errorf("oom %+v", r1.OOM)
	}
}

// A process.json whose OOM record has no snapshot (a companion before
// OOM.Count overwrote it with a later OOM the program caught) gives way to
// oom.json, written at the first OOM with its snapshot; one that has its
// snapshot is kept.
func TestReadBundleOOMRecord(t *testing.T) {
	for _, c := range []struct {
		proc string
		want OOM
	}{
		{`{"oom":{"requested_bytes":4,"step":3,"snapshot":null}}`, OOM{RequestedBytes: 2, Step: 1, Snapshot: "snapshot_oom.pickle"}},
		{`{"oom":{"requested_bytes":2,"step":1,"snapshot":"snapshot_oom.pickle","count":2}}`, OOM{RequestedBytes: 2, Step: 1, Snapshot: "snapshot_oom.pickle", Count: 2}},
		{`{"oom":null}`, OOM{RequestedBytes: 2, Step: 1, Snapshot: "snapshot_oom.pickle"}},
	} {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "manifest.json"), `{"schema_version":1,"ranks":[]}`)
		writeFile(t, filepath.Join(dir, "rank0", "process.json"), c.proc)
		writeFile(t, filepath.Join(dir, "rank0", "oom.json"), `{"requested_bytes":2,"step":1,"snapshot":"snapshot_oom.pickle"}`)
		b, err := ReadBundle(dir)
		if err != nil {
			t.Fatal(err)
		}
		if o := b.Ranks[0].OOM; o == nil || *o != c.want {
			t.Errorf("%s: oom %+v, want %+v", c.proc, o, c.want)
		}
	}
	// no oom.json: the record without a snapshot stays
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "manifest.json"), `{"schema_version":1,"ranks":[]}`)
	writeFile(t, filepath.Join(dir, "rank0", "process.json"), `{"oom":{"requested_bytes":4,"step":3,"snapshot":null}}`)
	if b, err := ReadBundle(dir); err != nil || b.Ranks[0].OOM == nil || b.Ranks[0].OOM.RequestedBytes != 4 {
		t.Errorf("%v %+v", err, b)
	}
}

func TestReadBundleErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadBundle(dir); err == nil || !strings.Contains(err.Error(), "manifest.json") {
		t.Errorf("empty folder: %v", err)
	}
	writeFile(t, filepath.Join(dir, "manifest.json"), `{"schema_version":1}`)
	writeFile(t, filepath.Join(dir, "rank0", "live.jsonl"), `{"time_us":1}`+"\n"+`{"time_us":"x"}`+"\n"+`{"time_us":3}`+"\n")
	_, err := ReadBundle(dir)
	if err == nil || !strings.Contains(err.Error(), "live.jsonl: byte offset 14") {
		t.Errorf("bad middle line: %v", err)
	}
	writeFile(t, filepath.Join(dir, "manifest.json"), `{"schema_version":2}`)
	if _, err := ReadBundle(dir); err == nil || !strings.Contains(err.Error(), "schema_version 2") {
		t.Errorf("future schema: %v", err)
	}
	writeFile(t, filepath.Join(dir, "manifest.json"), `{"schema_`)
	if _, err := ReadBundle(dir); err == nil || !strings.Contains(err.Error(), "manifest.json") {
		t.Errorf("truncated manifest: %v", err)
	}
}

// A rank whose history was recorded in windows: process.json's history
// mode and each window's snapshot file are read, and window snapshots sort
// by number (window10 after window2), after step snapshots and before the
// OOM and end snapshots.
func TestReadBundleWindows(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "manifest.json"), `{"schema_version":1,"name":"x","ranks":[]}`)
	writeFile(t, filepath.Join(dir, "rank0", "process.json"), `{"rank":0,"max_allocated_bytes":900,
 "history":{"context":"alloc","record_steps":"auto","switchable":true,"mode":"windows"},
 "stack_windows":[{"first_step":-1,"last_step":2,"reason":"setup","start_time_us":10,"end_time_us":20,"snapshot":"snapshot_window0.pickle"},
  {"first_step":16,"last_step":16,"reason":"periodic","start_time_us":30,"end_time_us":40}]}`)
	for _, f := range []string{"snapshot_end.pickle", "snapshot_window10.pickle", "snapshot_window2.pickle", "snapshot_oom.pickle", "snapshot_step5.pickle"} {
		writeFile(t, filepath.Join(dir, "rank0", f), "x")
	}
	writeFile(t, filepath.Join(dir, "rank1", "process.json"), `{"rank":1,"history":{"context":"alloc","record_steps":"auto","switchable":true}}`)
	b, err := ReadBundle(dir)
	if err != nil {
		t.Fatal(err)
	}
	r0, r1 := b.Ranks[0].Info, b.Ranks[1].Info
	if !r0.Windowed() || r0.History.Mode != HistoryWindows || r1.Windowed() || (&RankInfo{}).Windowed() {
		t.Errorf("windowed: rank0 %+v, rank1 %+v", r0.History, r1.History)
	}
	want := []StackWindow{{FirstStep: -1, LastStep: 2, Reason: "setup", StartTimeUs: 10, EndTimeUs: 20, Snapshot: "snapshot_window0.pickle"},
		{FirstStep: 16, LastStep: 16, Reason: "periodic", StartTimeUs: 30, EndTimeUs: 40}}
	if len(r0.StackWindows) != 2 || r0.StackWindows[0] != want[0] || r0.StackWindows[1] != want[1] {
		t.Errorf("stack windows %+v", r0.StackWindows)
	}
	var names []string
	for _, s := range b.Ranks[0].Snapshots {
		names = append(names, filepath.Base(s))
	}
	if got := strings.Join(names, " "); got != "snapshot_step5.pickle snapshot_window2.pickle snapshot_window10.pickle snapshot_oom.pickle snapshot_end.pickle" {
		t.Errorf("snapshot order: %s", got)
	}
}

// A rank folder named on its own is that rank of its bundle: ListBundle
// lists the bundle with it alone (rank3 and rank3_pid7 are two folders).
func TestListBundleRankFolder(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "manifest.json"), `{"schema_version":1,"name":"x","ranks":[]}`)
	for _, r := range []string{"rank0", "rank3", "rank3_pid7"} {
		writeFile(t, filepath.Join(dir, r, "process.json"), `{}`)
	}
	writeFile(t, filepath.Join(dir, "other", "process.json"), `{}`)
	for _, c := range []struct {
		dir  string
		rank bool
		want string
	}{
		{"rank3", true, "rank3"},
		{"rank3_pid7/", true, "rank3_pid7"},
		{"rank0", true, "rank0"},
		{".", false, "rank0 rank3 rank3_pid7"},
		{"other", false, ""},
	} {
		p := filepath.Join(dir, c.dir)
		if got := IsBundleRank(p); got != c.rank {
			t.Errorf("IsBundleRank(%s) = %v", c.dir, got)
		}
		b, err := ListBundle(p)
		if c.want == "" {
			if err == nil {
				t.Errorf("ListBundle(%s): no error", c.dir)
			}
			continue
		}
		if err != nil {
			t.Fatalf("ListBundle(%s): %v", c.dir, err)
		}
		var names []string
		for _, r := range b.Ranks {
			names = append(names, filepath.Base(r.Dir))
		}
		if got := strings.Join(names, " "); got != c.want || filepath.Clean(b.Dir) != filepath.Clean(dir) {
			t.Errorf("ListBundle(%s): ranks %q in %s, want %q in the bundle", c.dir, got, b.Dir, c.want)
		}
	}
}
