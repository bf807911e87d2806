package bundle

import (
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestReadRoles(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "manifest.json"), `{"schema_version":1}`)
	lines := []string{
		`{"region":"ddp_buckets","rank":0,"device":0,"step":0,"start_time_us":5,"end_time_us":9,"allocated_before_bytes":100,"allocated_after_bytes":1100}`,
		`{"time_us":10,"rank":0,"device":0,"step":0,"at":"first_forward","tensors":[{"kind":"parameter","name":"h.w","module":"h","dtype":"float32","ptr":4096,"bytes":1024}]}`,
		// a large inventory written in two parts
		`{"time_us":20,"rank":0,"device":0,"step":0,"at":"step_end","part":0,"parts":2,"tensors":[{"kind":"parameter","name":"h.w","module":"h","dtype":"float32","ptr":4096,"bytes":1024},{"kind":"gradient","name":"h.w","module":"h","dtype":"float32","ptr":8192,"bytes":4096,"tensor_bytes":1024}]}`,
		`{"time_us":20,"rank":0,"device":0,"step":0,"at":"step_end","part":1,"parts":2,"tensors":[{"kind":"gradient","name":"g.w","module":"g","dtype":"float32","ptr":8192,"bytes":4096,"offset_bytes":1024,"tensor_bytes":1024},{"kind":"optimizer_state","name":"h.w.exp_avg","module":"h","dtype":"float32","ptr":16384,"bytes":1024}]}`,
		`{"time_us":30,"rank":0,"device":0,"step":4,"at":"end","tensors":[]}`,
	}
	writeFile(t, filepath.Join(dir, "rank0", "tensors.jsonl"), strings.Join(lines, "\n")+"\n"+`{"time_us":40,"at":"en`) // torn last line
	b, err := ReadBundle(dir)
	if err != nil {
		t.Fatal(err)
	}
	r := b.Ranks[0]
	if len(r.Regions) != 1 || r.Regions[0] != (Region{Kind: "ddp_buckets", StartTimeUs: 5, EndTimeUs: 9, AllocatedBeforeBytes: 100, AllocatedAfterBytes: 1100}) {
		t.Errorf("regions %+v", r.Regions)
	}
	if len(r.Inventories) != 3 || len(r.Inventories[1].Tensors) != 4 || r.Inventories[1].At != "step_end" {
		t.Fatalf("inventories %+v", r.Inventories)
	}
	for _, tc := range []struct {
		t    int64
		want string
	}{{0, "first_forward"}, {10, "first_forward"}, {19, "first_forward"}, {20, "step_end"}, {1 << 40, "end"}} {
		if got := r.InventoryAt(tc.t); got == nil || got.At != tc.want {
			t.Errorf("InventoryAt(%d) = %+v, want %s", tc.t, got, tc.want)
		}
	}
	inv := r.InventoryAt(25)
	names := func(refs []TensorRef) []string {
		var out []string
		for _, x := range refs {
			out = append(out, x.Kind+":"+x.Name)
		}
		return out
	}
	for _, tc := range []struct {
		addr int64
		want []string
	}{
		{4095, nil},
		{4096, []string{"parameter:h.w"}},
		{4096 + 1023, []string{"parameter:h.w"}},
		{4096 + 1024, nil},
		{8192 + 3000, []string{"gradient:h.w", "gradient:g.w"}}, // a bucket shared by two gradients
		{16384, []string{"optimizer_state:h.w.exp_avg"}},
		{1 << 40, nil},
	} {
		if got := names(inv.Lookup(tc.addr)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Lookup(%d) = %q, want %q", tc.addr, got, tc.want)
		}
	}
	if inv.Bytes(KindGradient) != 4096 || inv.Bytes(KindParameter) != 1024 || inv.Bytes(KindBuffer) != 0 {
		t.Errorf("bytes: gradient %d parameter %d", inv.Bytes(KindGradient), inv.Bytes(KindParameter))
	}
	if g := inv.Tensors[2]; g.Size() != 1024 || inv.Tensors[0].Size() != 1024 {
		t.Errorf("sizes %+v", inv.Tensors)
	}
	var none Rank
	if none.InventoryAt(5) != nil {
		t.Error("no inventories: want nil")
	}
}

func TestReadRolesErrors(t *testing.T) {
	for _, tc := range []struct{ name, data, want string }{
		{"orphan part", `{"time_us":20,"at":"step_end","part":1,"parts":2,"tensors":[]}` + "\n", "byte offset 0: part 1 of 2"},
		{"neither", `{"time_us":20}` + "\n", "want an inventory"},
		{"bad type", `{"time_us":20,"at":"end","tensors":[{"ptr":"x"}]}` + "\n" + "{}\n", "byte offset 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "manifest.json"), `{"schema_version":1}`)
			p := filepath.Join(dir, "rank0", "tensors.jsonl")
			writeFile(t, p, tc.data)
			_, err := ReadBundle(dir)
			if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q naming %s", err, tc.want, p)
			}
		})
	}
}

// BenchmarkReadRoles reads the inventories of a 7B-parameter-class model (291
// parameters with gradient and two AdamW states each: 1,164 tensors, two
// lines per inventory) taken 20 times, then looks up every storage.
func BenchmarkReadRoles(b *testing.B) {
	dir := b.TempDir()
	var sb strings.Builder
	const n = 291
	for k := range 20 {
		var refs []string
		for i := range n {
			name := fmt.Sprintf("model.layers.%d.self_attn.q_proj.weight", i)
			base := int64(139870000000000) + int64(i)<<26
			for j, kind := range []string{"parameter", "gradient", "optimizer_state", "optimizer_state"} {
				refs = append(refs, fmt.Sprintf(`{"kind":%q,"name":%q,"module":"model.layers.%d.self_attn.q_proj","dtype":"bfloat16","ptr":%d,"bytes":33554432}`, kind, name, i, base+int64(j)<<24))
			}
		}
		for p := 0; p*1000 < len(refs); p++ {
			part := refs[p*1000 : min(len(refs), (p+1)*1000)]
			fmt.Fprintf(&sb, `{"time_us":%d,"rank":0,"device":0,"step":%d,"at":"step_end","part":%d,"parts":2,"tensors":[%s]}`+"\n", 1795276567247676+k*1000000, k, p, strings.Join(part, ","))
		}
	}
	writeFile(b, filepath.Join(dir, "tensors.jsonl"), sb.String())
	b.SetBytes(int64(sb.Len()))
	b.ResetTimer()
	for range b.N {
		invs, _, err := readRoles(dir)
		if err != nil || len(invs) != 20 || len(invs[0].Tensors) != 4*n {
			b.Fatalf("%v: %d inventories", err, len(invs))
		}
		inv := &invs[19]
		for _, x := range inv.Tensors {
			if len(inv.Lookup(x.Ptr+x.Bytes/2)) != 1 {
				b.Fatal("lookup")
			}
		}
	}
}
