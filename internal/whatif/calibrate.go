package whatif

import (
	"fmt"
	"math"

	"github.com/ptscope/ptscope/internal/estimate"
)

// term classes: which measured number stands for an estimate term
type class uint8

const (
	cOther  class = iota // cuBLAS workspace, buffers, the batch
	cParams              // parameters (and master weights)
	cOpt
	cDDP
	cGrads
	cSaved // what forward keeps: activations, logits, loss, autocast weight copies
	cHeld  // outputs the caller holds after forward
	cTemp  // temporaries and gathered parameters, per phase
	nClass
)

func classOf(ph estimate.PhaseName, term string) class {
	switch term {
	case "parameters", "master_weights":
		return cParams
	case "optimizer_state", "fp32_grad_copy":
		return cOpt
	case "ddp_buckets":
		return cDDP
	case "gradients":
		return cGrads
	case "autocast_weight_cache", "activations", "loss":
		return cSaved
	case "logits":
		if ph == estimate.Forward {
			return cSaved
		}
		return cHeld
	case "temporaries", "unsharded_params":
		return cTemp
	}
	return cOther
}

// calibration holds, per class, how the run's measurement compares with
// the estimate of its own job: a ratio (measured / estimated) and, per
// phase, a residual the classes do not explain.
type calibration struct {
	ratio    [nClass]float64
	how      [nClass]string
	measured [nClass]bool
	run      [nClass]int64 // the measured value
	est      [nClass]int64 // the estimate of the run's job
	tempR    map[estimate.PhaseName]float64
	residual map[estimate.PhaseName]int64
}

// savedAfterForward is the estimate's counterpart of what a forward leaves
// allocated (backward's start minus forward's): the saved activations,
// weight copies and loss, and the logits when the caller holds them.
func savedAfterForward(r *estimate.Result) int64 {
	t := r.Top()
	var n int64
	for _, term := range t.Phases[0].Terms {
		switch term.Name {
		case "autocast_weight_cache", "activations", "loss":
			n += term.Bytes
		case "logits":
			if r.Setup.KeepLogits {
				n += term.Bytes
			}
		}
	}
	return n
}

// heldAfterBackward is the estimate's counterpart of what backward leaves
// beyond the gradients: the outputs the caller holds.
func heldAfterBackward(r *estimate.Result) int64 {
	if !r.Setup.KeepLogits {
		return 0
	}
	return r.Top().Activations.LogitsBytes
}

func (p *Predictor) calibrate() {
	c := &p.cal
	for i := range c.ratio {
		c.ratio[i] = 1
	}
	c.tempR = map[estimate.PhaseName]float64{}
	c.residual = map[estimate.PhaseName]int64{}
	top := p.baseR.Top()
	ms := top.ModelStates
	m := p.meas
	set := func(k class, run, est int64, ok bool, how string) {
		c.run[k], c.est[k] = run, est
		if !ok || est <= 0 || run <= 0 {
			c.how[k] = "estimated: the run does not show " + how
			return
		}
		c.ratio[k], c.measured[k], c.how[k] = float64(run)/float64(est), true, how
	}
	set(cParams, m.params, ms.ParametersBytes+ms.MasterWeightsBytes, m.params > 0, "parameters in its tensor inventory")
	set(cOpt, m.opt, ms.OptimizerStateBytes+ms.FP32GradCopyBytes, m.opt > 0, "optimizer state in its tensor inventory")
	set(cGrads, m.grads, ms.GradientsBytes, m.grads > 0, "gradients in its tensor inventory")
	set(cDDP, p.run.DDPBucketsBytes, ms.DDPBucketsBytes, p.run.DDPBucketsBytes > 0, "DDP buckets")
	set(cOther, m.other, p.dev.CublasWorkspaceBytes, m.otherOK, "a steady step's start")
	if m.otherOK {
		c.how[cOther] = "allocated at a steady step's start beyond parameters and optimizer state: cuBLAS workspaces, buffers, the batch"
	}
	for k, h := range map[class]string{cParams: "the tensor inventory's parameters", cOpt: "the tensor inventory's optimizer state", cGrads: "the tensor inventory's gradients", cDDP: "the DDP buckets' region"} {
		if c.measured[k] {
			c.how[k] = h
		}
	}
	if m.keptOK {
		set(cSaved, m.kept, savedAfterForward(p.baseR), true, "allocated when backward starts minus when forward starts, in a steady step: saved activations, weight copies, logits, loss")
	} else {
		c.how[cSaved] = "estimated: the run completed no step"
		c.est[cSaved] = savedAfterForward(p.baseR)
		p.calibrateFromOOM()
	}
	if m.heldOK {
		set(cHeld, m.held, heldAfterBackward(p.baseR), m.held > 0, "allocated after backward minus before forward, less the gradients: the outputs the caller holds")
	} else {
		c.how[cHeld], c.est[cHeld] = "estimated: the run completed no step", heldAfterBackward(p.baseR)
	}
	// each phase whose peak the run showed: the temporaries' ratio that
	// makes the estimate of the run's job meet it (what is left over, when
	// the phase has too few temporaries to carry it, stands as a residual)
	for _, ph := range top.Phases {
		pk, ok := m.peaks[ph.Name]
		if !ok {
			continue
		}
		var rest, temp int64
		for _, t := range ph.Terms {
			if k := classOf(ph.Name, t.Name); k == cTemp {
				temp += t.Bytes
			} else {
				rest += scale(t.Bytes, c.ratio[k])
			}
		}
		need := pk.bytes - rest
		if temp > 0 && need >= 0 {
			r := float64(need) / float64(temp)
			if r >= 0.25 && r <= 4 {
				c.tempR[ph.Name] = r
				continue
			}
		}
		c.residual[ph.Name] = need - temp
	}
}

// calibrateFromOOM: a run that ran out of memory in its forward still
// shows what the forward had allocated when it stopped. When the failed
// request is the size of a tensor the estimate places at the loss (the
// fp32 copy of the logits, the log-softmax), what was allocated then is
// everything the forward keeps before it: that calibrates the saved
// activations.
func (p *Predictor) calibrateFromOOM() {
	m, r := p.meas, p.run
	if !m.oomRecord || m.oomPhase != "forward" || r.OOM == nil {
		return
	}
	fwd := p.baseR.Top().Phases[0]
	var saved, logits, loss, temp int64
	for _, t := range fwd.Terms {
		switch t.Name {
		case "autocast_weight_cache", "activations":
			saved += t.Bytes
		case "logits":
			logits = t.Bytes
		case "loss":
			loss = t.Bytes
		case "temporaries":
			temp = t.Bytes
		}
	}
	near := func(a, b int64) bool { return b > 0 && math.Abs(float64(a-b)) <= 0.01*float64(b) }
	got := m.oomAt - m.oomStart
	// the candidates: what was allocated before each loss tensor in turn
	var cands []int64
	if near(r.OOM.RequestedBytes, temp) || near(r.OOM.RequestedBytes, loss) {
		cands = append(cands, saved+logits, saved+logits+temp)
	}
	if near(r.OOM.RequestedBytes, logits) {
		cands = append(cands, saved)
	}
	if len(cands) == 0 || got <= 0 {
		p.notes = append(p.notes, "saved activations: the run ran out of memory in its forward at a request the estimate does not place; estimated")
		return
	}
	best := cands[0]
	for _, c := range cands[1:] {
		if math.Abs(float64(got-c)) < math.Abs(float64(got-best)) {
			best = c
		}
	}
	// the weight copies and the cuBLAS workspace arrive in the first forward too
	best += p.dev.CublasWorkspaceBytes
	if best <= 0 {
		return
	}
	ratio := float64(got) / float64(best)
	if ratio < 0.5 || ratio > 2 {
		p.notes = append(p.notes, fmt.Sprintf("saved activations: what the forward had allocated when it ran out (%d B) is far from the estimate (%d B); estimated", got, best))
		return
	}
	c := &p.cal
	c.ratio[cSaved], c.measured[cSaved] = ratio, true
	c.run[cSaved] = int64(math.Round(ratio * float64(c.est[cSaved])))
	c.how[cSaved] = "what the forward had allocated when it ran out of memory (the activations and logits before the loss), against the estimate's"
}

func scale(b int64, r float64) int64 {
	if r == 1 {
		return b
	}
	return int64(math.Round(float64(b) * r))
}
