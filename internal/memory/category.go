package memory

import (
	"strings"

	"github.com/ptscope/ptscope/internal/snapshot"
	"github.com/ptscope/ptscope/internal/spillmem"
)

// Category is what an allocation holds, in torch.profiler's vocabulary.
type Category uint8

// Categories. BeforeRecording is memory whose creation was not recorded.
const (
	CatUnknown Category = iota
	CatParameter
	CatOptimizerState
	CatGradient
	CatActivation
	CatTemporary
	CatInput
	CatBeforeRecording
	numCategories
)

var categoryNames = [...]string{"unknown", "parameter", "optimizer_state", "gradient", "activation",
	"temporary", "input", "allocated_before_recording"}

func (c Category) String() string { return categoryNames[c] }

// Categories lists every category in display order.
func Categories() []Category {
	return []Category{CatParameter, CatOptimizerState, CatGradient, CatActivation, CatTemporary, CatInput,
		CatBeforeRecording, CatUnknown}
}

// stackFacts are the frame-derived facts categorisation needs, computed
// once per unique stack.
type stackFacts struct {
	class      frameClass
	paramInit  bool // module construction, .to()/.cuda(), init, state-dict loading
	optimState bool // torch.optim state initialisation
	data       bool // torch.utils.data, pin_memory
	makeGrads  bool // the loss gradient seed
	top        snapshot.FrameID
	hasTop     bool
}

func factsOf(s *snapshot.Snapshot, id snapshot.StackID, class frameClass, kinds []FrameKind) stackFacts {
	f := stackFacts{class: class}
	ids := s.Stacks[id]
	if len(ids) > 0 {
		f.top, f.hasTop = ids[0], true
	}
	for _, fid := range allocating(ids, kinds) {
		fr := &s.Frames[fid]
		fn, name := fr.Filename, fr.Name
		switch {
		case strings.Contains(fn, "torch/nn/modules/module.py") && (name == "_apply" || name == "to" || name == "cuda" || name == "load_state_dict" || name == "_load_from_state_dict"):
			f.paramInit = true
		case strings.Contains(fn, "torch/nn/init.py") || strings.Contains(fn, "torch/nn/parameter.py") || name == "reset_parameters" || name == "from_pretrained" || name == "_init_weights":
			f.paramInit = true
		case strings.Contains(fn, "torch/nn/modules/") && name == "__init__":
			// Module construction, e.g. under `with torch.device("cuda")`.
			f.paramInit = true
		case strings.Contains(fn, "torch/optim/") && (name == "_init_group" || name == "_init_state" || strings.Contains(name, "state")):
			f.optimState = true
		case strings.Contains(fn, "torch/utils/data/") || name == "pin_memory":
			f.data = true
		case strings.Contains(fn, "torch/autograd/") && name == "_make_grads":
			f.makeGrads = true
		}
	}
	return f
}

// categorize assigns a category to every allocation from its stacks, its
// lifetime and the phases it spans.
func categorize(s *snapshot.Snapshot, r *Replay, ph *Phases) {
	facts := make([]stackFacts, len(s.Stacks))
	for i := range facts {
		facts[i] = factsOf(s, snapshot.StackID(i), ph.classes[i], ph.kinds)
	}
	n := len(ph.Of)
	training := trainingTrace(ph)
	firstFwd := firstForwards(ph)
	// nextFwd[i]: the first entry at or after i that starts a forward phase
	// run (-1: none), for inputs made outside any phase
	var nextFwd []int32
	nextForward := func(a *Alloc) int {
		if a.AllocIdx < 0 {
			return -1
		}
		if nextFwd == nil {
			nextFwd = nextForwards(ph.Of, s.Arena())
		}
		return int(nextFwd[a.AllocIdx])
	}
	firstForwardOfStep := func(a *Alloc) int {
		if a.AllocIdx < 0 || ph.StepOf[a.AllocIdx] < 0 {
			return -1
		}
		return firstFwd[ph.StepOf[a.AllocIdx]]
	}
	phaseAt := func(i int32) Phase {
		if i < 0 || int(i) >= n {
			return PhaseUnknown
		}
		return ph.Of[i]
	}
	for k := range r.Allocs {
		spillmem.Poll(r.arena, k)
		a := &r.Allocs[k]
		fa := facts[a.Stack]
		ff := facts[a.FreeStack]
		pa, pf := phaseAt(a.AllocIdx), phaseAt(a.FreeReqIdx)
		alive := a.FreeReqIdx < 0
		switch {
		case a.Origin != FromTrace:
			// Created before recording: the free tells what it was.
			switch {
			case pf == PhaseZeroGrad || (ff.class == fcOptim && ff.hasTop && strings.Contains(s.Frames[ff.top].Name, "zero_grad")):
				a.Category = CatGradient
			case pf == PhaseBackward:
				a.Category = CatActivation
			case fa.paramInit:
				a.Category = CatParameter
			case fa.optimState:
				a.Category = CatOptimizerState
			case len(ph.Of) == 0:
				// no history: nothing was recorded, so nothing came before
				a.Category = CatUnknown
			default:
				a.Category = CatBeforeRecording
			}
		case fa.paramInit:
			a.Category = CatParameter
		case fa.class == fcOptim || pa == PhaseOptimizer:
			// State outlives the step that creates it; foreach temporaries do not.
			if fa.optimState || alive || pf != PhaseOptimizer {
				a.Category = CatOptimizerState
			} else {
				a.Category = CatTemporary
			}
		case fa.data:
			a.Category = CatInput
		case fa.makeGrads:
			a.Category = CatTemporary
		case pa == PhaseBackward:
			// Gradients outlive backward: they reach the optimizer or zero_grad.
			if alive || pf == PhaseOptimizer || pf == PhaseZeroGrad || pf == PhaseOther || !sameStep(ph, a) {
				a.Category = CatGradient
			} else {
				a.Category = CatTemporary
			}
		case pa == PhaseForward:
			switch {
			case pf == PhaseBackward || (alive && training):
				a.Category = CatActivation
			case freedInSameStatement(fa, ff, a):
				a.Category = CatTemporary
			case fa.class != fcForward && int(a.AllocIdx) <= firstForwardOfStep(a):
				a.Category = CatInput
			default:
				a.Category = CatActivation
			}
		case pa == PhaseZeroGrad:
			a.Category = CatGradient
		case (pa == PhaseUnknown || pa == PhaseOther) && feedsForward(a, nextForward(a)):
			// Made outside any phase and alive when the next forward began:
			// the batch that forward reads (with gradient accumulation, the
			// next micro-batch's; the first step's is made before it).
			a.Category = CatInput
		default:
			a.Category = CatUnknown
		}
	}
}

// nextForwards returns, per entry, the first entry at or after it that
// begins a run of forward entries (-1: none).
func nextForwards(of []Phase, arena *spillmem.Arena) []int32 {
	out := spillmem.Make[int32](arena, len(of))
	next := int32(-1)
	for i := len(of) - 1; i >= 0; i-- {
		spillmem.Poll(arena, i)
		if of[i] == PhaseForward && (i == 0 || of[i-1] != PhaseForward) {
			next = int32(i)
		}
		out[i] = next
	}
	return out
}

// feedsForward reports whether a was allocated before entry fwd (its
// step's first forward entry; -1: none) and was still alive then.
func feedsForward(a *Alloc, fwd int) bool {
	return fwd >= 0 && a.AllocIdx >= 0 && int(a.AllocIdx) < fwd && (a.FreeReqIdx < 0 || int(a.FreeReqIdx) > fwd)
}

// sameStep reports whether a was allocated and freed within one step.
func sameStep(ph *Phases, a *Alloc) bool {
	if a.FreeReqIdx < 0 || a.AllocIdx < 0 {
		return false
	}
	if len(ph.Steps) == 0 {
		return true
	}
	return ph.StepOf[a.AllocIdx] == ph.StepOf[a.FreeReqIdx]
}

func trainingTrace(ph *Phases) bool {
	for _, p := range ph.Of {
		if p == PhaseBackward || p == PhaseOptimizer {
			return true
		}
	}
	return false
}

// firstForwards returns, per step, the first forward entry (-1 if none).
func firstForwards(ph *Phases) []int {
	out := make([]int, len(ph.Steps))
	for k, st := range ph.Steps {
		spillmem.PollSparse(ph.arena, k)
		out[k] = -1
		for i := st.Start; i < st.End; i++ {
			if ph.Of[i] == PhaseForward {
				out[k] = i
				break
			}
		}
	}
	return out
}

// freedInSameStatement: the free's innermost frame is the alloc's, so the
// tensor lived inside one call (an op's temporary).
func freedInSameStatement(fa, ff stackFacts, a *Alloc) bool {
	return a.FreeReqIdx >= 0 && fa.hasTop && ff.hasTop && fa.top == ff.top
}
