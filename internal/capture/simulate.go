package capture

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

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
	// Ranks, when set, are the ranks to simulate one after another into one
	// bundle (--simulate-rank all or a list); Rank is then ignored.
	Ranks []int
	// NoGPU runs the command without a GPU: CUDA tensors become fake
	// tensors whose sizes a tracker counts with the allocator's rounding.
	// With WorldSize it also fakes the process group (one rank of N).
	NoGPU bool
	// Imbalance > 1: the hottest expert of the simulated rank receives
	// Imbalance times the mean tokens per expert (all_to_all of counts).
	Imbalance float64
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

// ranks are the ranks simulated, in the order they run (ascending: a
// pipeline stage reads what the stage before it sent).
func (s Simulate) ranks() []int {
	if len(s.Ranks) > 0 {
		return s.Ranks
	}
	return []int{s.Rank}
}

// ParseSimulateRanks reads --simulate-rank: a rank, "all" (every rank of
// world), or a list such as 0,2-3.
func ParseSimulateRanks(text string, world int) ([]int, error) {
	text = strings.TrimSpace(text)
	if text == "all" {
		if world < 1 {
			return nil, fmt.Errorf("simulate-rank all needs --simulate-world-size")
		}
		out := make([]int, world)
		for i := range out {
			out[i] = i
		}
		return out, nil
	}
	rs, err := ParseRanks(text)
	if err != nil {
		return nil, fmt.Errorf("simulate-%v", err)
	}
	if len(rs) == 0 {
		return nil, fmt.Errorf("simulate-rank %q: want a rank, a list such as 0,2-3, or all", text)
	}
	return rs, nil
}

func (s Simulate) validate() error {
	if s.WorldSize < 0 {
		return fmt.Errorf("simulate-world-size must be at least 1")
	}
	if s.WorldSize == 0 && (s.Rank != 0 || len(s.Ranks) > 0) {
		return fmt.Errorf("simulate-rank needs --simulate-world-size")
	}
	if s.WorldSize > 1<<20 {
		return fmt.Errorf("simulate-world-size %d is too large", s.WorldSize)
	}
	for _, r := range append([]int{s.Rank}, s.Ranks...) {
		if r < 0 || (s.WorldSize > 0 && r >= s.WorldSize) {
			return fmt.Errorf("simulate-rank %d must be in 0..%d", r, max(s.WorldSize-1, 0))
		}
	}
	if s.Imbalance != 0 && (s.Imbalance < 1 || s.Imbalance > 1e6 || s.Imbalance != s.Imbalance) {
		return fmt.Errorf("simulate-imbalance %g: want a factor of at least 1 (1.3: the hottest expert receives 1.3x the mean)", s.Imbalance)
	}
	if s.Imbalance != 0 && s.WorldSize == 0 {
		return fmt.Errorf("simulate-imbalance needs --simulate-world-size")
	}
	return nil
}

// simulateConfig is the "simulate" object of PTSCOPE_CONFIG (null for a real run).
type simulateConfig struct {
	Mode      string  `json:"mode"`
	WorldSize int     `json:"world_size"`
	Rank      int     `json:"rank"`
	Ranks     []int   `json:"ranks,omitempty"` // every rank of the bundle (--simulate-rank all or a list)
	Imbalance float64 `json:"imbalance,omitempty"`
}

func (s Simulate) config() *simulateConfig {
	if s.Mode() == ModeCapture {
		return nil
	}
	ws := s.WorldSize
	if ws == 0 {
		ws = 1
	}
	c := &simulateConfig{Mode: s.Mode(), WorldSize: ws, Rank: s.ranks()[0], Imbalance: s.Imbalance}
	if len(s.Ranks) > 1 {
		c.Ranks = s.Ranks
	}
	return c
}

// forRank is s simulating rank r alone (one process of a multi-rank run).
func (s Simulate) forRank(r int) Simulate {
	s.Rank, s.Ranks = r, nil
	return s
}

// childConfig is PTSCOPE_CONFIG for the process simulating rank r of a
// multi-rank simulation: its own rank, and the list of all.
func (o *Options) childConfig(r int) []byte {
	o2 := *o
	o2.Simulate = o.Simulate.forRank(r)
	c := o2.config()
	if c.Simulate != nil {
		c.Simulate.Ranks = o.Simulate.Ranks
	}
	b, _ := json.Marshal(c)
	return b
}

// env is the launcher environment a simulated rank sees: the variables
// torchrun would set for that rank, with LOCAL_RANK 0 so that code that
// picks its GPU from LOCAL_RANK uses the one GPU there is.
func (s Simulate) env() []string {
	if s.WorldSize == 0 {
		return nil
	}
	r := s.ranks()[0]
	return []string{
		"RANK=" + strconv.Itoa(r), "WORLD_SIZE=" + strconv.Itoa(s.WorldSize),
		"LOCAL_RANK=0", "LOCAL_WORLD_SIZE=1", "GROUP_RANK=" + strconv.Itoa(r),
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
		nc := []string{
			"the CUDA context, cuBLAS/cuDNN workspaces and kernel libraries (hundreds of MiB to over 1 GiB per process)",
			"the caching allocator's cache and fragmentation: reserved memory is reported equal to allocated",
			"block-splitting and large-pool rounding beyond the 512-byte rounding of every tensor",
			"memory allocated outside PyTorch's dispatcher (custom CUDA extensions, NCCL)",
			"values: tensors hold no data, .item() returns 1, data-dependent control flow follows that",
		}
		if s.WorldSize > 1 {
			nc = append(nc, "NCCL communicator buffers, communication time, and data-dependent imbalance between ranks (every rank is assumed to look like the simulated one)")
		}
		return nc
	}
	return nil
}

// simulationFacts is rankN/simulation.json, written by the companion.
type simulationFacts struct {
	Mode        string            `json:"mode"`
	WorldSize   int               `json:"world_size"`
	Rank        int               `json:"rank"`
	Backend     string            `json:"backend"`
	Collectives map[string]int    `json:"collectives"`
	Faked       map[string]string `json:"faked"`
	Unsupported []string          `json:"unsupported_ops"`
	Problems    []string          `json:"problems"`
}

// finishSimulation fills m.Simulation from the options and the ranks'
// simulation.json files.
func finishSimulation(dir string, m *bundle.Manifest, s Simulate) {
	if s.Mode() == ModeCapture {
		return
	}
	// what the ranks sent each other (the companion's Mailbox) served its
	// purpose once the last rank ran
	_ = os.RemoveAll(filepath.Join(dir, ".ptscope", "simulate"))
	cfg := s.config()
	sim := &bundle.Simulation{Mode: cfg.Mode, WorldSize: cfg.WorldSize, Rank: cfg.Rank, Ranks: cfg.Ranks, Imbalance: cfg.Imbalance, NotCounted: s.NotCounted()}
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
		for k, v := range f.Faked {
			if sim.Faked == nil {
				sim.Faked = map[string]string{}
			}
			sim.Faked[k] = v
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
	if s.WorldSize > 0 {
		m.WorldSize = cfg.WorldSize
	}
	for _, p := range sim.Problems {
		m.Warnings = append(m.Warnings, "simulation: "+p)
	}
	if len(m.Ranks) > 0 && s.WorldSize > 0 && sim.Backend == "" {
		m.Warnings = append(m.Warnings, "simulation: the program never initialised torch.distributed; it ran as a single process (the simulated world size had no effect)")
	}
}
