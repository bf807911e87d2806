package capture

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/ptscope/ptscope/internal/bundle"
)

// Simulation modes (the bundle's Manifest.Mode, Simulation.Mode).
const (
	ModeCapture       = bundle.ModeCapture
	ModeSimulateWorld = bundle.ModeSimulateWorld
	ModeFake          = bundle.ModeFake
)

// Simulate configures the simulated modes of `ptscope run`.
type Simulate struct {
	// WorldSize > 0 runs the command as rank Rank of a WorldSize-rank job on
	// one GPU: torch.distributed uses PyTorch's "fake" backend.
	WorldSize int
	Rank      int
	// NoGPU runs the command without a GPU: CUDA tensors become fake
	// tensors whose sizes a tracker counts with the allocator's rounding.
	NoGPU bool
}

// Mode is the manifest's mode for s.
func (s Simulate) Mode() string {
	switch {
	case s.NoGPU:
		return ModeFake
	case s.WorldSize > 0:
		return ModeSimulateWorld
	}
	return ModeCapture
}

func (s Simulate) validate() error {
	if s.WorldSize < 0 {
		return fmt.Errorf("simulate-world-size must be at least 1")
	}
	if s.WorldSize == 0 && s.Rank != 0 {
		return fmt.Errorf("simulate-rank needs --simulate-world-size")
	}
	if s.WorldSize > 1<<20 {
		return fmt.Errorf("simulate-world-size %d is too large", s.WorldSize)
	}
	if s.Rank < 0 || (s.WorldSize > 0 && s.Rank >= s.WorldSize) {
		return fmt.Errorf("simulate-rank %d must be in 0..%d", s.Rank, max(s.WorldSize-1, 0))
	}
	return nil
}

// simulateConfig is the "simulate" object of PTSCOPE_CONFIG (null for a real run).
type simulateConfig struct {
	Mode      string `json:"mode"`
	WorldSize int    `json:"world_size"`
	Rank      int    `json:"rank"`
}

func (s Simulate) config() *simulateConfig {
	if s.Mode() == ModeCapture {
		return nil
	}
	ws := s.WorldSize
	if ws == 0 {
		ws = 1
	}
	return &simulateConfig{Mode: s.Mode(), WorldSize: ws, Rank: s.Rank}
}

// env is the launcher environment a simulated rank sees: the variables
// torchrun would set for that rank, with LOCAL_RANK 0 so that code that
// picks its GPU from LOCAL_RANK uses the one GPU there is.
func (s Simulate) env() []string {
	if s.WorldSize == 0 {
		return nil
	}
	return []string{
		"RANK=" + strconv.Itoa(s.Rank), "WORLD_SIZE=" + strconv.Itoa(s.WorldSize),
		"LOCAL_RANK=0", "LOCAL_WORLD_SIZE=1", "GROUP_RANK=" + strconv.Itoa(s.Rank),
		"MASTER_ADDR=127.0.0.1", "MASTER_PORT=29500", "TORCH_DIST_INIT_BARRIER=0",
	}
}

// NotCounted lists what a simulated run's numbers leave out.
func (s Simulate) NotCounted() []string {
	switch s.Mode() {
	case ModeSimulateWorld:
		return []string{
			"NCCL communicator buffers and NCCL's own device memory (outside the caching allocator)",
			"communication time and overlap: collectives return at once, so every timing is optimistic",
			"data-dependent imbalance between ranks (MoE routing, variable sequence lengths): every rank is assumed to look like the simulated one",
			"received values: collectives leave outputs as they were (all-gathers copy this rank's shard), so losses and gradients are meaningless",
		}
	case ModeFake:
		return []string{
			"the CUDA context, cuBLAS/cuDNN workspaces and kernel libraries (hundreds of MiB to over 1 GiB per process)",
			"the caching allocator's cache and fragmentation: reserved memory is reported equal to allocated",
			"block-splitting and large-pool rounding beyond the 512-byte rounding of every tensor",
			"memory allocated outside PyTorch's dispatcher (custom CUDA extensions, NCCL)",
			"values: tensors hold no data, .item() returns 0, data-dependent control flow follows that",
		}
	}
	return nil
}

// simulationFacts is rankN/simulation.json, written by the companion.
type simulationFacts struct {
	Mode        string         `json:"mode"`
	WorldSize   int            `json:"world_size"`
	Rank        int            `json:"rank"`
	Backend     string         `json:"backend"`
	Collectives map[string]int `json:"collectives"`
	Unsupported []string       `json:"unsupported_ops"`
	Problems    []string       `json:"problems"`
}

// finishSimulation fills m.Simulation from the options and the ranks'
// simulation.json files.
func finishSimulation(dir string, m *bundle.Manifest, s Simulate) {
	if s.Mode() == ModeCapture {
		return
	}
	cfg := s.config()
	sim := &bundle.Simulation{Mode: cfg.Mode, WorldSize: cfg.WorldSize, Rank: cfg.Rank, NotCounted: s.NotCounted()}
	seen := map[string]bool{}
	for _, r := range m.Ranks {
		data, err := bundle.ReadSideFile(filepath.Join(dir, r.Dir, "simulation.json"), bundle.MaxJSONSideFileBytes)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			m.Warnings = append(m.Warnings, err.Error())
			continue
		}
		var f simulationFacts
		if err := json.Unmarshal(data, &f); err != nil {
			m.Warnings = append(m.Warnings, fmt.Sprintf("%s/simulation.json: %v", r.Dir, err))
			continue
		}
		if f.Backend != "" {
			sim.Backend = f.Backend
		}
		for k, v := range f.Collectives {
			if sim.Collectives == nil {
				sim.Collectives = map[string]int{}
			}
			sim.Collectives[k] += v
		}
		for _, u := range f.Unsupported {
			if !seen["u"+u] {
				seen["u"+u] = true
				sim.Unsupported = append(sim.Unsupported, u)
			}
		}
		for _, p := range f.Problems {
			if !seen["p"+p] {
				seen["p"+p] = true
				sim.Problems = append(sim.Problems, p)
			}
		}
	}
	sort.Strings(sim.Unsupported)
	m.Simulation = sim
	if cfg.Mode == ModeSimulateWorld {
		m.WorldSize = cfg.WorldSize
	}
	for _, p := range sim.Problems {
		m.Warnings = append(m.Warnings, "simulation: "+p)
	}
	if len(m.Ranks) > 0 && cfg.Mode == ModeSimulateWorld && sim.Backend == "" {
		m.Warnings = append(m.Warnings, "simulation: the program never initialised torch.distributed; it ran as a single process (the simulated world size had no effect)")
	}
}
