package view

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestCriticalView: the summary leaves the critical path's chain out;
// trace/critical has it, each piece naming its event in the model.
func TestCriticalView(t *testing.T) {
	s := loadSet(t, traceFile(t, "real", "gpt2_6l_dataloader_bottleneck.pt.trace.json.gz"))
	sum := ask(t, s, "trace/summary?input=0")
	full, err := json.Marshal(s.inputs.list[0].trace.result)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sum, []byte(`"kind":"kernel_gap"`)) || len(sum) > len(full)*3/4 {
		t.Errorf("the summary (%d bytes, the result %d) holds the critical path's chain", len(sum), len(full))
	}
	body := ask(t, s, "trace/critical?input=0")
	var cp TraceCritical
	if err := json.Unmarshal(body, &cp); err != nil {
		t.Fatalf("%v %.300s", err, body)
	}
	if len(cp.Path) == 0 || cp.LongestStep == "" || len(cp.Steps) != 3 {
		t.Fatalf("critical path: %d pieces, longest %q, %d steps", len(cp.Path), cp.LongestStep, len(cp.Steps))
	}
	m := s.inputs.list[0].trace.model
	var sumNS int64
	for _, sg := range cp.Path {
		sumNS += sg.DurationNS
		if sg.Event >= 0 && (sg.Event >= int64(m.Events.Len()) || m.Name(int(sg.Event)) != sg.Name) {
			t.Fatalf("piece %+v does not name its event", sg)
		}
	}
	for _, st := range cp.Steps {
		if st.Step == cp.LongestStep && st.LengthNS != sumNS {
			t.Errorf("the chain of %s sums to %d ns, its length is %d", st.Step, sumNS, st.LengthNS)
		}
	}
	body = ask(t, s, "trace/gpu?input=0")
	var g TraceGPU
	if json.Unmarshal(body, &g) != nil || len(g.Streams) == 0 || len(g.Streams[0].Queue.Series) == 0 || g.Launch.Launches == 0 {
		t.Fatalf("gpu view: %.300s", body)
	}
}
