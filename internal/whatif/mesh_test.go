package whatif

import (
	"testing"

	"github.com/ptscope/ptscope/internal/bundle"
)

// TestTensorParallel reads the tensor-parallel degree from the DeviceMesh
// records the companion writes for DTensor parameters (torch's own
// strings for the placements).
func TestTensorParallel(t *testing.T) {
	for _, c := range []struct {
		name string
		t    bundle.TensorRef
		want int
	}{
		{"named (dp, tp), FSDP2 x TP", bundle.TensorRef{FSDP: "sharded", Mesh: []int{2, 2}, MeshDims: []string{"dp", "tp"}, Placements: []string{"_StridedShard(dim=0, sf=2)", "Shard(dim=0)"}}, 2},
		{"named, a norm replicated over tp", bundle.TensorRef{FSDP: "sharded", Mesh: []int{4, 2}, MeshDims: []string{"dp", "tp"}, Placements: []string{"Shard(dim=0)", "Replicate()"}}, 2},
		{"named HSDP, no tp", bundle.TensorRef{FSDP: "sharded", Mesh: []int{2, 4}, MeshDims: []string{"dp_replicate", "dp_shard"}, Placements: []string{"Replicate()", "Shard(dim=0)"}}, 0},
		{"unnamed FSDP2 x TP", bundle.TensorRef{FSDP: "sharded", Mesh: []int{2, 4}, Placements: []string{"Shard(dim=0)", "Shard(dim=1)"}}, 4},
		{"unnamed HSDP", bundle.TensorRef{FSDP: "sharded", Mesh: []int{2, 4}, Placements: []string{"Replicate()", "Shard(dim=0)"}}, 0},
		{"unnamed FSDP2 x TP, torch 2.11's short strings", bundle.TensorRef{FSDP: "sharded", Mesh: []int{2, 2}, Placements: []string{"_S(0, 2)", "S(0)"}}, 2},
		{"unnamed HSDP, short strings", bundle.TensorRef{FSDP: "sharded", Mesh: []int{2, 2}, Placements: []string{"R", "S(0)"}}, 0},
		{"tensor parallelism alone", bundle.TensorRef{Mesh: []int{8}, Placements: []string{"Shard(dim=0)"}}, 8},
		{"FSDP2 alone", bundle.TensorRef{FSDP: "sharded", Mesh: []int{8}, Placements: []string{"Shard(dim=0)"}}, 0},
		{"no mesh recorded (an older companion)", bundle.TensorRef{FSDP: "sharded", DTensor: true}, 0},
	} {
		if got := tensorParallel(c.t); got != c.want {
			t.Errorf("%s: tp %d, want %d", c.name, got, c.want)
		}
	}
}

// TestLayoutFromMesh: the capture of FSDP2 x TP on 4 GPUs (dp 2 x tp 2) is
// read as that layout, not as FSDP2 over 4 ranks (what the inventory
// said before it recorded each DTensor's mesh).
func TestLayoutFromMesh(t *testing.T) {
	_, s := predictor(t, "m_qwen25_fsdp2_tp2_ws4")
	if !s.FSDP || s.DP != 2 || s.TP != 2 {
		t.Errorf("read as FSDP %v, dp %d, tp %d; want FSDP2, dp 2, tp 2", s.FSDP, s.DP, s.TP)
	}
	_, s = predictor(t, "m_qwen25_fsdp2_ws2")
	if !s.FSDP || s.DP != 2 || s.TP > 1 {
		t.Errorf("FSDP2 alone read as FSDP %v, dp %d, tp %d", s.FSDP, s.DP, s.TP)
	}
}
