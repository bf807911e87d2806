package kineto

import (
	"bytes"
	"context"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"

	"github.com/ptscope/ptscope/internal/attack"
)

func read(t *testing.T, s string) (*Trace, error) {
	t.Helper()
	return Read(context.Background(), strings.NewReader(s), Options{ChunkBytes: 64})
}

func TestReadEmpty(t *testing.T) {
	for _, in := range []string{"", "  \n"} {
		if _, err := read(t, in); err == nil || !strings.Contains(err.Error(), "offset") {
			t.Errorf("%q: err %v", in, err)
		}
	}
	if _, err := read(t, "hello"); err == nil || !strings.Contains(err.Error(), "not a Chrome trace") {
		t.Errorf("garbage: err %v", err)
	}
	tr, err := read(t, `{"traceEvents": []}`)
	if err != nil || tr.Events.Len() != 0 {
		t.Errorf("empty array: %v", err)
	}
}

const oneOp = `{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 2, "ts": 10.5, "dur": 2, "args": {"External id": 7}}`

func TestReadEncodings(t *testing.T) {
	in := `{"schemaVersion": 1, "baseTimeNanoseconds": 1700000000000000000, "traceEvents": [
	{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 2, "ts": 1669783687464300, "dur": 25},
	{"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 2, "ts": 1712195495505583.123, "dur": 1.5},
	{"ph": "X", "cat": "cpu_op", "name": "c", "pid": "1", "tid": "2", "ts": 4458676416788.066, "dur": 0.001},
	{"ph": "X", "cat": "Kernel", "name": "k", "pid": 0, "tid": 7, "ts": 5, "args": {"blocks per SM": "inf", "stream": "0x7", "device": 0, "est. achieved occupancy %": 50}},
	{"ph": "X", "cat": "Runtime", "name": "r", "pid": "Spans", "tid": "PyTorch Profiler", "ts": 1e3, "dur": 2.5e0},
	{"ph": "f", "id": 9, "pid": 1, "tid": 2, "ts": 1, "cat": "ac2g", "name": "ac2g", "bp": "e"},
	{"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 2, "ts": 3, "args": {"Device Type": 1, "Device Id": 0, "Addr": 123, "Bytes": 512, "Total Allocated": 1024, "Total Reserved": 2048}},
	{"name": "thread_name", "ph": "M", "pid": 1, "tid": 2, "args": {"name": "thread 2 (python3)"}}
	], "traceName": "x.json", "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 4}}`
	tr, err := read(t, in)
	if err != nil {
		t.Fatal(err)
	}
	e := tr.Events
	wantTS := []int64{1669783687464300000, 1712195495505583123, 4458676416788066, 5000, 1000000}
	wantDur := []int64{25000, 1500, 1, 0, 2500}
	for i := range wantTS {
		if e.TS[i] != wantTS[i] || e.Dur[i] != wantDur[i] {
			t.Errorf("event %d: ts %d dur %d, want %d %d", i, e.TS[i], e.Dur[i], wantTS[i], wantDur[i])
		}
	}
	if e.PID[2] != 1 || e.TID[2] != 2 {
		t.Errorf("string numeric pid/tid: %d %d", e.PID[2], e.TID[2])
	}
	if tr.PIDString(e.PID[4]) != "Spans" || tr.PIDString(e.TID[4]) != "PyTorch Profiler" {
		t.Errorf("string pid %q tid %q", tr.PIDString(e.PID[4]), tr.PIDString(e.TID[4]))
	}
	if e.Kind[3] != KindKernel || e.Kind[4] != KindRuntime {
		t.Errorf("legacy categories: %v %v", e.Kind[3], e.Kind[4])
	}
	g := tr.GPU[e.Aux[3]]
	if g.Stream != 7 || g.Occupancy != 50 || g.BlocksPerSM < 1e30 {
		t.Errorf("lenient args: %+v", g)
	}
	if len(tr.Flows) != 1 || tr.Flows[0].ID != 9 || !tr.Flows[0].Finish || tr.Flows[0].Kind != FlowAsync {
		t.Errorf("flows %+v", tr.Flows)
	}
	if len(tr.Memory) != 1 || tr.Memory[0].TotalReserved != 2048 || tr.Memory[0].Bytes != 512 {
		t.Errorf("memory %+v", tr.Memory)
	}
	d := tr.Meta.Distributed
	if d == nil || d.Rank != 3 || d.WorldSize != 4 || tr.Meta.TraceName != "x.json" || tr.Meta.BaseTimeNS != 1700000000000000000 {
		t.Errorf("meta %+v %+v", tr.Meta, d)
	}
	if tr.ThreadName(1, 2) != "thread 2 (python3)" {
		t.Errorf("thread %q", tr.ThreadName(1, 2))
	}
}

func TestReadBareArray(t *testing.T) {
	tr, err := read(t, "[\n"+oneOp+",\n"+oneOp+"\n]")
	if err != nil || tr.Events.Len() != 2 || !tr.Meta.BareArray {
		t.Fatalf("%v %+v", err, tr)
	}
	// the legacy profiler leaves the array open
	tr, err = read(t, "["+oneOp+",")
	if err != nil || tr.Events.Len() != 1 || !tr.Damage.Truncated {
		t.Fatalf("open array: %v", err)
	}
}

func TestReadDamage(t *testing.T) {
	cases := []struct {
		name              string
		event             string
		repaired, dropped int
	}{
		{"bare N/A", `{"ph": "X", "cat": "cpu_op", "name": "x", "pid": 1, "tid": 1, "ts": 1, "dur": 1, "args": {"v": N/A}}`, 1, 0},
		{"control char", "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"a\x01b\", \"pid\": 1, \"tid\": 1, \"ts\": 1, \"dur\": 1}", 1, 0},
		{"unescaped quote", `{"ph": "X", "cat": "cpu_op", "name": "f("x.py")", "pid": 1, "tid": 1, "ts": 1, "dur": 1}`, 1, 0},
		{"odd quote", "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"say \"hi\n, \"pid\": 1, \"tid\": 1, \"ts\": 1, \"dur\": 1}", 1, 0},
		{"invalid", `{"ph": "X", "cat": cpu_op, "name": }`, 0, 1},
	}
	for _, c := range cases {
		in := `{"traceEvents": [` + oneOp + ",\n" + c.event + ",\n" + oneOp + "\n]}"
		tr, err := read(t, in)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if tr.Damage.Repaired != c.repaired || tr.Damage.Dropped != c.dropped {
			t.Errorf("%s: damage %+v", c.name, tr.Damage)
		}
		if want := 2 + c.repaired; tr.Events.Len() != want {
			t.Errorf("%s: %d events, want %d", c.name, tr.Events.Len(), want)
		}
		if c.dropped > 0 && len(tr.Damage.Warnings) == 0 {
			t.Errorf("%s: no warning", c.name)
		}
	}
}

func TestReadTruncatedFixture(t *testing.T) {
	raw := readGz(t, fixture(t, gpt2Trace))
	for _, cut := range []int{len(raw) / 2, len(raw) - 10} {
		tr, err := Read(context.Background(), bytes.NewReader(raw[:cut]), Options{})
		if err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		if !tr.Damage.Truncated || len(tr.Damage.Warnings) == 0 || tr.Events.Len() == 0 {
			t.Errorf("cut %d: damage %+v, %d events", cut, tr.Damage, tr.Events.Len())
		}
	}
	// cut inside the header: no event at all is an error
	if _, err := Read(context.Background(), bytes.NewReader(raw[:300]), Options{}); err == nil {
		t.Error("header-only input: no error")
	}
}

func TestParseMicros(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true}, {"25", 25000, true}, {"1.5", 1500, true}, {"4458676416788.066", 4458676416788066, true},
		{"1712195495505583.0", 1712195495505583000, true}, {"0.0004", 0, true}, {"0.0005", 1, true},
		{"-3.25", -3250, true}, {"1e3", 1000000, true}, {"2.5E-3", 3, true}, {`"12.5"`, 12500, true},
		{"", 0, false}, {"abc", 0, false}, {"1.2.3", 0, false}, {"99999999999999999999", 0, false},
	} {
		got, ok := ParseMicros([]byte(c.in))
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("ParseMicros(%q) = %d, %v; want %d, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func FuzzRead(f *testing.F) {
	f.Add([]byte(`{"traceEvents": [` + oneOp + `]}`))
	f.Add([]byte("[" + oneOp + "," + oneOp + "]"))
	f.Add([]byte(`{"schemaVersion": 1, "deviceProperties": [{"id": 0, "numSms": 132}], "traceEvents": [{"ph": "i", "name": "[memory]", "ts": 1, "args": {"Bytes": -5}}, {"ph": "s", "id": "0x1", "cat": "ac2g"}], "distributedInfo": {"rank": 1}}`))
	f.Add([]byte(`{"traceEvents": [{"ph": "X", "name": "a\"b", "ts": N/A, "args": {"grid": [1, "2", null]}}`))
	if p := fixturePath(f, "gpt2tiny_with_stack.pt.trace.json"); p != "" {
		if b, err := readFileHead(p, 8192); err == nil {
			f.Add(b)
		}
	}
	for _, c := range attack.Cases() {
		if c.Small && c.Command == "trace" {
			f.Add(c.Make())
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := Read(context.Background(), bytes.NewReader(data), Options{ChunkBytes: 97, Workers: 2})
		// a mapped file is cut in place: the same trace, or the same error
		tm, merr := readBytes(context.Background(), data, Options{ChunkBytes: 97, Workers: 2})
		if (err == nil) != (merr == nil) || err != nil && err.Error() != merr.Error() || !reflect.DeepEqual(tr, tm) {
			t.Fatalf("read from memory: %v, want %v (traces equal: %v)", merr, err, reflect.DeepEqual(tr, tm))
		}
		// scanEvent decodes what go-json decodes
		tg, gerr := Read(context.Background(), bytes.NewReader(data), Options{ChunkBytes: 97, Workers: 2, stdJSONOnly: true})
		if (err == nil) != (gerr == nil) || err != nil && err.Error() != gerr.Error() || !reflect.DeepEqual(tr, tg) {
			t.Fatalf("read with go-json only: %v, want %v (traces equal: %v)", gerr, err, reflect.DeepEqual(tr, tg))
		}
		if err != nil {
			return
		}
		e := tr.Events
		n := e.Len()
		if len(e.Dur) != n || len(e.Name) != n || len(e.Aux) != n || len(e.PID) != n {
			t.Fatalf("ragged columns")
		}
		for i := 0; i < n; i++ {
			if e.Dur[i] < 0 || int(e.Name[i]) >= len(tr.Strings) {
				t.Fatalf("event %d: dur %d name %d", i, e.Dur[i], e.Name[i])
			}
			if a := e.Aux[i]; a >= 0 {
				if e.Kind[i].IsGPU() && int(a) >= len(tr.GPU) || isOpKind(e.Kind[i]) && int(a) >= len(tr.Ops) {
					t.Fatalf("event %d: aux %d out of range", i, a)
				}
			}
		}
	})
}

func isOpKind(k Kind) bool { return k == KindCPUOp || k == KindUserAnnotation }

func TestReadFileCompressed(t *testing.T) {
	dir := t.TempDir()
	plain := []byte(`{"traceEvents": [` + oneOp + "," + oneOp + `], "traceName": "t"}`)
	var zb, xb bytes.Buffer
	zw, _ := zstd.NewWriter(&zb)
	zw.Write(plain)
	zw.Close()
	xw, _ := xz.NewWriter(&xb)
	xw.Write(plain)
	xw.Close()
	for name, data := range map[string][]byte{"a.json": plain, "a.json.zst": zb.Bytes(), "a.json.xz": xb.Bytes()} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, data, 0o644)
		tr, err := ReadFile(context.Background(), p, Options{})
		if err != nil || tr.Events.Len() != 2 || tr.Meta.TraceName != "t" || tr.Path != p {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := ReadFile(context.Background(), filepath.Join(dir, "missing.json"), Options{}); err == nil {
		t.Error("missing file: no error")
	}
}

// FuzzParseMicros checks the exact decimal parse against math/big.
func FuzzParseMicros(f *testing.F) {
	for _, s := range []string{"0", "25", "1.5", "4458676416788.066", "1712195495505583.0", "-3.25", "1e3", "2.5E-3", "0.0005", "123.4567"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := ParseMicros([]byte(s))
		r, valid := new(big.Rat).SetString(s)
		if !ok {
			return
		}
		if !valid || strings.ContainsAny(s, "/_xXpP") || strings.HasPrefix(strings.TrimLeft(s, "+-"), ".") {
			if strings.ContainsAny(s, "/_xXpP") {
				t.Fatalf("%q parsed as %d", s, got)
			}
			return
		}
		// exact: round(value * 1000) half away from zero
		ns := new(big.Rat).Mul(r, big.NewRat(1000, 1))
		neg := ns.Sign() < 0
		ns.Abs(ns)
		q := new(big.Int).Quo(ns.Num(), ns.Denom())
		rem := new(big.Rat).Sub(ns, new(big.Rat).SetInt(q))
		if rem.Cmp(big.NewRat(1, 2)) >= 0 {
			q.Add(q, big.NewInt(1))
		}
		if neg {
			q.Neg(q)
		}
		if !q.IsInt64() || q.Int64() != got {
			// the float fallback (exponent with more than 18 digits) may differ by rounding
			if strings.ContainsAny(s, "eE") && len(s) > 20 {
				return
			}
			t.Fatalf("ParseMicros(%q) = %d, exact %s", s, got, q)
		}
	})
}

// TestReadAbsurdTimes: an event whose ts or dur is outside any trace's
// time is counted invalid and dropped, so that no span or sum wraps (a ts
// of 9.2e15 us made a step of 46,744,074 s); in bounds, it is kept.
func TestReadAbsurdTimes(t *testing.T) {
	for _, c := range []struct {
		ts, dur string
		kept    bool
		first   string
	}{
		{"9.2e15", "5", false, "ts is 9.2e15 us, outside any trace's time (dropped)"},
		{"-9.2e15", "5", false, "ts is -9.2e15 us, outside any trace's time (dropped)"},
		{"100", "9.2e15", false, "dur is 9.2e15 us, longer than any trace (dropped)"},
		{"1.7e15", "1e6", true, ""},
	} {
		ev := `{"ph": "X", "cat": "cpu_op", "name": "x", "pid": 1, "tid": 1, "ts": ` + c.ts + `, "dur": ` + c.dur + `}`
		tr, err := read(t, `{"traceEvents": [`+oneOp+",\n"+ev+",\n"+oneOp+"\n]}")
		if err != nil {
			t.Fatal(err)
		}
		want, invalid := 2, 1
		if c.kept {
			want, invalid = 3, 0
		}
		if tr.Events.Len() != want || tr.Damage.Invalid != invalid || !strings.HasSuffix(tr.Damage.InvalidFirst, c.first) {
			t.Errorf("ts %s dur %s: %d events, damage %+v", c.ts, c.dur, tr.Events.Len(), tr.Damage)
		}
	}
}
