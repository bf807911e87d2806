package kineto

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/testfixture"
)

// fixture returns the path of a shared fixture (skips when absent).
func fixture(t testing.TB, name string) string { return testfixture.Path(t, name) }

const gpt2Trace = "gpt2_6l_dataloader_bottleneck.pt.trace.json.gz"
const tinyStackTrace = "gpt2tiny_with_stack.pt.trace.json"

func TestReadFixture(t *testing.T) {
	tr, err := ReadFile(context.Background(), fixture(t, gpt2Trace), Options{})
	if err != nil {
		t.Fatal(err)
	}
	counts := map[Kind]int{}
	for _, k := range tr.Events.Kind {
		counts[k]++
	}
	// counts from Python's json.load of the same file
	want := map[Kind]int{KindCPUOp: 11889, KindRuntime: 1856, KindKernel: 1619, KindMemset: 298,
		KindDriver: 129, KindUserAnnotation: 21, KindGPUUserAnnotation: 12, KindMemcpy: 3, KindTrace: 1}
	for k, n := range want {
		if counts[k] != n {
			t.Errorf("%s: %d events, want %d", k, counts[k], n)
		}
	}
	if len(tr.Memory) != 12306 {
		t.Errorf("memory events %d, want 12306", len(tr.Memory))
	}
	var async, fb int
	for _, f := range tr.Flows {
		switch f.Kind {
		case FlowAsync:
			async++
		case FlowFwdBwd:
			fb++
		}
	}
	if async != 2326+1579 || fb != 726*2 {
		t.Errorf("flows async=%d fwdbwd=%d", async, fb)
	}
	if tr.Meta.BaseTimeNS != 1790857026000000000 || tr.Meta.SchemaVersion != 1 || tr.Meta.TraceName != "/tmp/tmp2df125i3.json" {
		t.Errorf("meta %+v", tr.Meta)
	}
	if len(tr.Meta.Devices) != 1 || tr.Meta.Devices[0].NumSMs != 132 || tr.Meta.Devices[0].TotalGlobalMem != 85017493504 {
		t.Errorf("devices %+v", tr.Meta.Devices)
	}
	if !tr.Meta.ProfileMemory || !tr.Meta.RecordShapes || tr.Meta.WithStack {
		t.Errorf("flags %+v", tr.Meta)
	}
	if tr.Damage.Dropped != 0 || tr.Damage.Repaired != 0 || len(tr.Damage.Warnings) != 0 {
		t.Errorf("damage %+v", tr.Damage)
	}
	// the first event: ts 4415523407895.216 us, dur 273.715 us
	if tr.Events.TS[0] != 4415523407895216 || tr.Events.Dur[0] != 273715 {
		t.Errorf("first event ts=%d dur=%d", tr.Events.TS[0], tr.Events.Dur[0])
	}
	if tr.Name(0) != "autograd::engine::evaluate_function: NllLossBackward0" || tr.Events.Ext[0] != 2049 {
		t.Errorf("first event %q ext %d", tr.Name(0), tr.Events.Ext[0])
	}
	seq := tr.Ops[tr.Events.Aux[0]].Seq
	if seq != 8265 {
		t.Errorf("seq %d", seq)
	}
	if name := tr.ThreadName(427, 472); name != "thread 472 (python3)" {
		t.Errorf("thread name %q", name)
	}
}

func TestReadChunkBoundaries(t *testing.T) {
	// every chunk size must give the same events as the default
	raw := readGz(t, fixture(t, gpt2Trace))
	ref, err := Read(context.Background(), bytes.NewReader(raw), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, chunk := range []int{1, 7, 4096, 100000} {
		tr, err := Read(context.Background(), bytes.NewReader(raw), Options{ChunkBytes: chunk, Workers: 3})
		if err != nil {
			t.Fatal(err)
		}
		if tr.Events.Len() != ref.Events.Len() || len(tr.Memory) != len(ref.Memory) || len(tr.Flows) != len(ref.Flows) {
			t.Fatalf("chunk %d: %d events, want %d", chunk, tr.Events.Len(), ref.Events.Len())
		}
		for i := range tr.Events.TS {
			if tr.Events.TS[i] != ref.Events.TS[i] || tr.Name(i) != ref.Name(i) {
				t.Fatalf("chunk %d: event %d differs", chunk, i)
			}
		}
	}
}

func readGz(t testing.TB, p string) []byte {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := b.ReadFrom(zr); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestReadWithStack(t *testing.T) {
	tr, err := ReadFile(context.Background(), fixture(t, tinyStackTrace), Options{})
	if err != nil {
		t.Fatal(err)
	}
	py := 0
	for _, k := range tr.Events.Kind {
		if k == KindPythonFunction {
			py++
		}
	}
	if py == 0 || !tr.Meta.WithStack {
		t.Errorf("python_function events %d, with_stack %v", py, tr.Meta.WithStack)
	}
	_ = strings.TrimSpace
}

// replicate repeats the events of a trace until it is about size bytes.
func replicate(t testing.TB, raw []byte, size int) []byte {
	start := bytes.Index(raw, []byte(`"traceEvents": [`)) + len(`"traceEvents": [`)
	end := bytes.LastIndex(raw, []byte("]"))
	events := raw[start:end]
	var b bytes.Buffer
	b.Grow(size + len(raw))
	b.Write(raw[:start])
	for b.Len() < size {
		b.Write(events)
		b.WriteString(",")
	}
	b.WriteString(`{"ph":"i","name":"end","pid":0,"tid":0,"ts":0}`)
	b.Write(raw[end:])
	return b.Bytes()
}

func BenchmarkReadReplicated(b *testing.B) {
	raw := replicate(b, readGz(b, fixture(b, gpt2Trace)), 100<<20)
	b.SetBytes(int64(len(raw)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Read(context.Background(), bytes.NewReader(raw), Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// fixturePath is a shared fixture or the repository's copy of it
// (testfixture.Path); it skips when neither is there.
func fixturePath(t testing.TB, name string) string { return testfixture.Path(t, name) }

func readFileHead(p string, n int) ([]byte, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	return b[:min(n, len(b))], nil
}

// TestReadSyncArgs checks the cuda_sync arguments on HTA's event-sync test
// trace (HTA tests/data/critical_path/cuda_event_sync), whose values
// Python's json.load gives as below.
func TestReadSyncArgs(t *testing.T) {
	tr, err := ReadFile(context.Background(), "../../testdata/hta/critical_path/cuda_event_sync.json.gz", Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, k := range tr.Events.Kind {
		if k != KindSync {
			continue
		}
		g := tr.GPU[tr.Events.Aux[i]]
		got = append(got, fmt.Sprintf("%s dev %d stream %d wait %d corr %d", tr.Name(i), g.Device, g.Stream, g.WaitStream, g.WaitCorr))
	}
	want := []string{"Stream Sync dev 0 stream 7 wait -1 corr -1", "Event Sync dev 0 stream -1 wait 7 corr 1533",
		"Event Sync dev 0 stream -1 wait 7 corr 1533", "Context Sync dev 0 stream -1 wait -1 corr -1"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("sync events:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
