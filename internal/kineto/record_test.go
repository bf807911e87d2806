package kineto

import (
	"context"
	"reflect"
	"testing"
)

// recordsOf writes every complete event, memory event and flow of t as
// records, owned alternately, the way the streaming analysis spills them.
func recordsOf(t *Trace) []byte {
	var buf []byte
	for i := 0; i < t.Events.Len(); i++ {
		buf = AppendEvent(buf, t, i, int64(i), i%2 == 0)
	}
	for i := range t.Memory {
		buf = AppendMemory(buf, &t.Memory[i], true)
	}
	for i := range t.Flows {
		buf = AppendFlow(buf, &t.Flows[i])
	}
	return buf
}

// TestRecordsRoundTrip checks that records of a real trace build back the
// same events, arguments, memory events and flows.
func TestRecordsRoundTrip(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"gpt2tiny_with_stack.pt.trace.json", "gpt2_6l_dataloader_bottleneck.pt.trace.json.gz"} {
		tr, err := ReadFile(context.Background(), fixture(t, name), Options{})
		if err != nil {
			t.Fatal(err)
		}
		buf := recordsOf(tr)
		// routing reads these fields without building
		for rest, i := buf, 0; i < tr.Events.Len(); i++ {
			r, next, ok := NextRecord(rest)
			if !ok || r.Tag() != RecordEvent || r.TS() != tr.Events.TS[i] || r.End() != tr.Events.End(i) ||
				r.Corr() != tr.Events.Corr[i] || r.Seq() != int64(i) || r.Kind() != tr.Events.Kind[i] {
				t.Fatalf("%s: record %d does not read back its event", name, i)
			}
			if tr.Events.Kind[i].IsGPU() && r.Device() != tr.GPU[tr.Events.Aux[i]].Device {
				t.Fatalf("%s: record %d: device %d, want %d", name, i, r.Device(), tr.GPU[tr.Events.Aux[i]].Device)
			}
			rest = next
		}
		b := NewBuilder(tr)
		if err := b.Add(buf, 0); err != nil {
			t.Fatal(err)
		}
		got, own, seq := b.Trace()
		if got.Events.Len() != tr.Events.Len() || len(own) != got.Events.Len() || len(seq) != got.Events.Len() {
			t.Fatalf("%s: %d events back, want %d", name, got.Events.Len(), tr.Events.Len())
		}
		for i := range seq {
			if seq[i] != int64(i) || own[i] != (i%2 == 0) {
				t.Fatalf("%s: event %d: seq %d owned %v", name, i, seq[i], own[i])
			}
		}
		for _, c := range []struct {
			what      string
			got, want any
		}{
			{"events", got.Events, tr.Events}, {"gpu", got.GPU, tr.GPU}, {"ops", got.Ops, tr.Ops},
			{"comms", got.Comms, tr.Comms}, {"memory", got.Memory, tr.Memory}, {"flows", got.Flows, tr.Flows},
		} {
			if !reflect.DeepEqual(c.got, c.want) {
				t.Errorf("%s: %s differ after the round trip", name, c.what)
			}
		}
		if len(tr.Memory) == 0 || len(tr.GPU) == 0 || len(tr.Ops) == 0 {
			t.Errorf("%s: fixture without memory events, GPU events or ops: the round trip tests little", name)
		}
	}
}

// FuzzBuilder feeds corrupted records to the builder: an error or a trace
// whose string ids are in range, never a panic.
func FuzzBuilder(f *testing.F) {
	tr := &Trace{Strings: []string{"", "aten::mm", "cpu_op", "[[2, 3]]", "float"}}
	tr.Events = Events{TS: []int64{10}, Dur: []int64{5}, Name: []uint32{1}, Cat: []uint32{2}, Kind: []Kind{KindCPUOp},
		PID: []int32{1}, TID: []int32{2}, Ext: []int64{7}, Corr: []int64{-1}, Aux: []int32{0}}
	tr.Ops = []OpInfo{{Seq: 3, Shape: 3, Types: 4, Comm: -1}}
	tr.Memory = []MemoryEvent{{TS: 11, Bytes: 512, DeviceID: 0, DeviceType: 1}}
	tr.Flows = []Flow{{ID: 1, TS: 12}}
	f.Add(recordsOf(tr))
	f.Add([]byte{'X', 0, 4, 0})
	f.Fuzz(func(t *testing.T, buf []byte) {
		b := NewBuilder(tr)
		if err := b.Add(buf, 0); err != nil {
			return
		}
		got, _, _ := b.Trace()
		for i := 0; i < got.Events.Len(); i++ {
			_ = got.Name(i)
			_ = got.Strings[got.Events.Cat[i]]
		}
		for _, o := range got.Ops {
			_, _ = got.Strings[o.Shape], got.Strings[o.Types]
		}
		for _, c := range got.Comms {
			_, _, _ = got.Strings[c.Collective], got.Strings[c.Dtype], got.Strings[c.PGName]
		}
	})
}
