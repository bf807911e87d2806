package load

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/snapshot"
	"github.com/ptscope/ptscope/internal/testfixture"
)

func snap(t *testing.T, name string) string { return testfixture.Testdata(t, "snapshots", name) }

// An unreadable input is reported in its own Input and in the error; the
// others are analysed, and the models stay beside the results.
func TestSnapshotsFilesAndErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.pickle")
	if err := os.WriteFile(bad, []byte{0x80, 0x04, 0x95, 0xff}, 0o644); err != nil {
		t.Fatal(err)
	}
	var labels []string
	reads := 0
	set, err := Snapshots(context.Background(), []string{snap(t, "leak_gpt2_2l.pickle.xz"), bad},
		SnapshotOptions{Progress: func(l string) { labels = append(labels, l) }, AfterRead: func() { reads++ }})
	if set == nil || err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("set %v, error %v", set, err)
	}
	rep := set.Report
	if rep.SchemaVersion != 2 || rep.Command != "analyze" || len(rep.Inputs) != 2 || len(set.Inputs) != 2 {
		t.Fatalf("report %+v", rep.Header)
	}
	g := 0 // inputs come in the order input.Find gives
	if rep.Inputs[0].Path == bad {
		g = 1
	}
	good, broken := rep.Inputs[g], rep.Inputs[1-g]
	if good.Error != "" || len(good.Devices) != 1 || broken.Error == "" || !strings.Contains(broken.Error, bad) || len(broken.Devices) != 0 {
		t.Errorf("inputs: %q %d, %q %d", good.Error, len(good.Devices), broken.Error, len(broken.Devices))
	}
	m := set.Inputs[g]
	if m.Snapshot == nil || len(m.Devices) != 1 || m.Devices[0].Result != good.Devices[0] || m.Devices[0].Replay == nil {
		t.Error("the model does not hold the analysis behind the result")
	}
	if set.Inputs[1-g].Snapshot != nil || rep.Comparison != nil {
		t.Error("a broken input has a model, or one device got a comparison")
	}
	if len(labels) != 2 || !strings.HasSuffix(labels[1], "(2 of 2)") || reads != 1 {
		t.Errorf("progress %q, %d reads", labels, reads)
	}
}

// A bug while analysing one input becomes an error naming it.
func TestPanicNamesInput(t *testing.T) {
	set := &SnapshotSet{Report: memory.NewReport()}
	err := set.add("broken.pickle", func() (*snapshot.Snapshot, error) {
		s := &snapshot.Snapshot{Stacks: [][]snapshot.FrameID{{}}, Strings: []string{""}, Streams: []int64{0}}
		// Columns of different lengths: no decoder makes these.
		s.Traces = []snapshot.Trace{{Action: []snapshot.Action{snapshot.ActionAlloc}}}
		return s, nil
	}, SnapshotOptions{}, SnapshotOptions{}.Memory, nil, nil)
	if err == nil || !strings.HasPrefix(err.Error(), "broken.pickle: internal error") {
		t.Fatalf("error %v", err)
	}
	if in := set.Report.Inputs[0]; in.Error != err.Error() || len(in.Devices) != 0 {
		t.Errorf("input %+v", in)
	}
}

func TestSnapshotsBundle(t *testing.T) {
	set, err := Snapshots(context.Background(), []string{testfixture.Testdata(t, "bundles", "lm_small_bf16")}, SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	in, m := set.Report.Inputs[0], set.Inputs[0]
	if in.Bundle == nil || m.Bundle == nil || m.Rank == nil || in.Bundle.DeviceTotalBytes == 0 || len(in.Devices) != 1 {
		t.Fatalf("bundle input %+v", in)
	}
	peaks := 0
	for _, p := range in.Phases {
		if p.PeakBytes > 0 && p.EndNS >= p.StartNS && p.StartNS > 1e18 {
			peaks++
		}
	}
	if peaks < 15 {
		t.Errorf("%d of %d phases have a peak from the snapshot", peaks, len(in.Phases))
	}
}

func TestSnapshotsOptions(t *testing.T) {
	set, err := Snapshots(context.Background(), []string{snap(t, "oom_capacity.pickle.xz")}, SnapshotOptions{Devices: []int{3}})
	if err != nil || len(set.Report.Inputs[0].Devices) != 0 {
		t.Errorf("device filter: %v, %d devices", err, len(set.Report.Inputs[0].Devices))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Snapshots(ctx, []string{snap(t, "oom_capacity.pickle.xz")}, SnapshotOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	if _, err := Snapshots(context.Background(), []string{t.TempDir()}, SnapshotOptions{}); err == nil || !strings.Contains(err.Error(), "no snapshots found") {
		t.Errorf("empty folder: %v", err)
	}
	data, err := os.ReadFile(snap(t, "oom_capacity.pickle.xz"))
	if err != nil {
		t.Fatal(err)
	}
	set, err = SnapshotBytes(context.Background(), "sample", data, SnapshotOptions{})
	if err != nil || set.Report.Inputs[0].Path != "sample" || !strings.HasSuffix(set.Report.Inputs[0].Format, "(xz)") || len(set.Inputs[0].Devices) != 1 {
		t.Errorf("from bytes: %v %+v", err, set.Report.Inputs[0])
	}
}
