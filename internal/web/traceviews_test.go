package web

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/load"
	"github.com/ptscope/ptscope/internal/testfixture"
	"github.com/ptscope/ptscope/internal/web/view"
)

func traceFile(t testing.TB, parts ...string) string {
	return filepath.Join(append([]string{testfixture.Root(t), "testdata", "traces"}, parts...)...)
}

// TestDistributedUnrelated: two rank-0 traces of different runs are two
// jobs with GroupJobs' warning; the view compares nothing.
func TestDistributedUnrelated(t *testing.T) {
	dir := t.TempDir()
	link(t, traceFile(t, "real", "gpt2_6l_dataloader_bottleneck.pt.trace.json.gz"), filepath.Join(dir, "a.pt.trace.json.gz"))
	link(t, traceFile(t, "real", "gpt2tiny_with_stack.pt.trace.json.xz"), filepath.Join(dir, "b.pt.trace.json.xz"))
	_, ts := serveDir(t, dir)
	code, body := get(t, ts, "/api/v1/trace/distributed?input=0")
	var d view.Distributed
	if code != 200 || json.Unmarshal(body, &d) != nil {
		t.Fatalf("%d %.300s", code, body)
	}
	if d.Jobs != 2 || !strings.Contains(d.Warning, "2 separate runs") || len(d.Ranks) != 1 || len(d.Others) != 1 || d.CrossRank != nil ||
		d.Ranks[0].Input != 0 || d.Others[0].Input != 1 {
		t.Errorf("unrelated traces: jobs %d, warning %q, ranks %+v, others %+v, cross-rank %v", d.Jobs, d.Warning, d.Ranks, d.Others, d.CrossRank != nil)
	}
}

// TestDistributedJob: the two ranks of the FSDP job are compared as the
// trace command compares them, and the served results stay as analysed.
func TestDistributedJob(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"rank0.pt.trace.json.gz", "rank1.pt.trace.json.gz"} {
		link(t, traceFile(t, "fsdp", f), filepath.Join(dir, f))
	}
	_, ts := serveDir(t, dir)
	_, before := get(t, ts, "/api/v1/trace/summary?input=1")
	code, body := get(t, ts, "/api/v1/trace/distributed?input=1")
	var d view.Distributed
	if code != 200 || json.Unmarshal(body, &d) != nil {
		t.Fatalf("%d %.300s", code, body)
	}
	set, err := load.Traces(context.Background(), []string{dir}, load.TraceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := set.Report
	if d.Jobs != 1 || d.Warning != "" || len(d.Ranks) != 2 || d.CrossRank == nil || want.CrossRank == nil {
		t.Fatalf("the FSDP job: jobs %d, warning %q, %d ranks, cross-rank %v", d.Jobs, d.Warning, len(d.Ranks), d.CrossRank != nil)
	}
	if d.CrossRank.Straggler != want.CrossRank.Straggler || d.CrossRank.MaxSkewNS != want.CrossRank.MaxSkewNS || len(d.Findings) != len(want.Findings) {
		t.Errorf("straggler %d, skew %d, %d findings; trace says %d, %d, %d", d.CrossRank.Straggler, d.CrossRank.MaxSkewNS, len(d.Findings),
			want.CrossRank.Straggler, want.CrossRank.MaxSkewNS, len(want.Findings))
	}
	for k, r := range d.Ranks {
		w := want.Ranks[k]
		if r.Rank != w.Rank || r.AverageStepNS != w.AverageStepNS || r.Input != k {
			t.Errorf("rank row %d: %+v, want rank %d average %d", k, r, w.Rank, w.AverageStepNS)
		}
		o := r.StepOverlap
		if sum := o.ComputeOnlyNS + o.OverlapNS + o.CommunicationOnlyNS + o.OtherNS; sum <= 0 || sum > w.AverageStepNS+int64(len(w.Steps)) || sum < w.AverageStepNS-int64(len(w.Steps)) {
			t.Errorf("rank %d: the step split sums to %d, the average step is %d", r.Rank, sum, w.AverageStepNS)
		}
	}
	if _, after := get(t, ts, "/api/v1/trace/summary?input=1"); !bytes.Equal(before, after) {
		t.Error("comparing the ranks changed the served result")
	}
}
