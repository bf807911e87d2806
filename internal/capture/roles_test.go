package capture

import (
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
