package gen

import (
	"bytes"
	"compress/gzip"
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/ptscope/ptscope/internal/kineto"
)

var update = flag.Bool("update", false, "rewrite the committed synthetic traces")

// committed maps the files of testdata/traces to their scenario and rank.
var committed = []struct {
	file, scenario string
	rank           int
}{
	{"fsdp/rank0.pt.trace.json.gz", "fsdp", 0},
	{"fsdp/rank1.pt.trace.json.gz", "fsdp", 1},
	{"ddp1.pt.trace.json.gz", "ddp1", 0},
	{"dataloader.pt.trace.json.gz", "dataloader", 0},
}

// TestCommittedTraces: each committed synthetic trace is exactly what its
// scenario writes.
func TestCommittedTraces(t *testing.T) {
	for _, c := range committed {
		var want bytes.Buffer
		if _, err := Scenarios(c.rank)[c.scenario].Write(&want); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("..", "..", "..", "testdata", "traces", c.file)
		if *update {
			var z bytes.Buffer
			zw, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
			zw.Write(want.Bytes())
			zw.Close()
			if err := os.WriteFile(path, z.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(zr)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want.Bytes()) {
			t.Errorf("%s is not what scenario %s writes (go test ./internal/kineto/gen -run Committed -update)", c.file, c.scenario)
		}
	}
}

// TestScenarioReads: every scenario is a trace the reader takes without
// damage, with the events it promises.
func TestScenarioReads(t *testing.T) {
	for name, s := range Scenarios(1) {
		var b bytes.Buffer
		st, err := s.Write(&b)
		if err != nil {
			t.Fatal(err)
		}
		if st.Bytes != int64(b.Len()) {
			t.Errorf("%s: Stats.Bytes %d, wrote %d", name, st.Bytes, b.Len())
		}
		tr, err := kineto.Read(context.Background(), &b, kineto.Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if tr.Damage.Repaired+tr.Damage.Dropped+tr.Damage.Garbage > 0 || tr.Damage.Truncated {
			t.Errorf("%s: damage %+v", name, tr.Damage)
		}
		kernels, steps := 0, 0
		for i := 0; i < tr.Events.Len(); i++ {
			switch {
			case tr.Events.Kind[i] == kineto.KindKernel:
				kernels++
			case tr.Name(i) == "Optimizer.step#AdamW.step":
				steps++
			}
		}
		if steps != s.Steps || kernels < s.Steps*(3*s.Layers+1)/2 {
			t.Errorf("%s: %d optimizer steps, %d kernels", name, steps, kernels)
		}
		if tr.Meta.BaseTimeNS != ScenarioTimeBase || (s.Backend != "") != (tr.Meta.Distributed != nil) {
			t.Errorf("%s: meta %+v", name, tr.Meta)
		}
		if s.Memory != (len(tr.Memory) > 0) {
			t.Errorf("%s: %d memory events", name, len(tr.Memory))
		}
	}
}
