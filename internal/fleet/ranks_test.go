package fleet

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/testfixture"
)

func TestRankOfPath(t *testing.T) {
	for _, c := range []struct {
		path, root string
		rank       int
		ok         bool
	}{
		{"job/rank3/snapshot.pickle", "job", 3, true},
		{"job/oom_rank12.pickle", "job", 12, true},
		{"job/rank_7.1700000000123.pt.trace.json.gz", "job", 7, true},
		{"job/RANK-5/x.pickle", "job", 5, true},
		{"job/node2_rank3/snapshot.pickle", "job", 3, true},
		{"job/rank1/rank4_memory_snapshot.pickle", "job", 4, true}, // the file names it
		{"job/iteration_100/rank2_memory_snapshot.pickle", "job", 2, true},
		{"job/snapshot.pickle", "job", 0, false},
		{"job/host_1234.1700000000.pt.trace.json", "job", 0, false},
		{"rank9/snapshot.pickle", "rank9", 9, true}, // the folder given is a rank's
		{"runs/rank9/job/snapshot.pickle", "runs/rank9/job", 0, false},
		{"/data/rank9/job/snapshot.pickle", "/data/rank9/job", 0, false},
	} {
		r, ok := RankOfPath(c.path, c.root)
		if r != c.rank || ok != c.ok {
			t.Errorf("%s (root %s): %d %v, want %d %v", c.path, c.root, r, ok, c.rank, c.ok)
		}
	}
}

// copyDir copies a folder tree (a committed bundle).
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		testfixture.CopyFile(t, p, filepath.Join(dst, rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Find recognises ranks from every source and leaves unrelated files out.
func TestFind(t *testing.T) {
	dir := t.TempDir()
	snap := testfixture.Testdata(t, "snapshots", "oom_capacity.pickle.xz")
	testfixture.CopyFile(t, snap, filepath.Join(dir, "rank3", "snapshot.pickle.xz"))
	testfixture.CopyFile(t, snap, filepath.Join(dir, "oom_rank5.pickle.xz"))
	testfixture.CopyFile(t, snap, filepath.Join(dir, "baseline.pickle.xz")) // no rank: not one
	os.WriteFile(filepath.Join(dir, "rank4_notes.txt"), []byte("not an artifact"), 0o644)
	// a trace named by tensorboard_trace_handler's default worker_name:
	// its rank is in distributedInfo
	testfixture.CopyFile(t, testfixture.Testdata(t, "traces", "fsdp", "rank1.pt.trace.json.gz"), filepath.Join(dir, "traces", "host_4242.1790000000000.pt.trace.json.gz"))
	testfixture.CopyFile(t, testfixture.Testdata(t, "traces", "dataloader.pt.trace.json.gz"), filepath.Join(dir, "traces", "worker.pt.trace.json.gz"))
	copyDir(t, testfixture.Testdata(t, "bundles", "lm_small_bf16"), filepath.Join(dir, "bundle"))

	in, err := Find(nil, []string{dir}, input.Snapshot, input.Trace)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range in.Files {
		rel, _ := filepath.Rel(dir, f.Path)
		got = append(got, fmt.Sprintf("%d %s %s %s", f.Rank, f.Kind, f.Source, rel))
	}
	want := []string{
		"0 snapshot bundle bundle/rank0",
		"0 trace bundle bundle/rank0/trace_step4.pt.trace.json.gz",
		"1 trace distributed_info traces/host_4242.1790000000000.pt.trace.json.gz",
		"3 snapshot path rank3/snapshot.pickle.xz",
		"5 snapshot path oom_rank5.pickle.xz",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("inputs:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(in.Skipped) != 2 || !strings.HasSuffix(in.Skipped[0].Path, "baseline.pickle.xz") || !strings.HasSuffix(in.Skipped[1].Path, "worker.pt.trace.json.gz") {
		t.Errorf("skipped %+v", in.Skipped)
	}
	if fmt.Sprint(in.Ranks()) != "[0 1 3 5]" || len(in.Of(0)) != 2 || len(in.Of(2)) != 0 || in.Count(input.Trace) != 2 {
		t.Errorf("ranks %v, of 0: %d, traces %d", in.Ranks(), len(in.Of(0)), in.Count(input.Trace))
	}
	if in.Files[0].Bundle == nil || in.Files[0].Bundle.Manifest.Name == "" {
		t.Error("a bundle input lacks its manifest")
	}
	// only the kinds asked for
	snaps, err := Find(nil, []string{dir}, input.Snapshot)
	if err != nil || snaps.Count(input.Trace) != 0 || len(snaps.Files) != 3 || len(snaps.Skipped) != 1 {
		t.Errorf("snapshots only: %v, %+v", err, snaps)
	}
	if _, err := Find(nil, []string{filepath.Join(dir, "missing")}, input.Snapshot); err == nil {
		t.Error("a missing path: no error")
	}
}
