package whatif

import (
	"fmt"
	"math"
	"sort"

	"github.com/ptscope/ptscope/internal/bundle"
	"github.com/ptscope/ptscope/internal/envelope"
	"github.com/ptscope/ptscope/internal/estimate"
	"github.com/ptscope/ptscope/internal/units"
)

// Row is one term of a prediction: what the run measured (RunBytes, when
// Measured), what the estimate says of the run's own job, the prediction
// for the changed job and how the prediction was made.
type Row struct {
	Term          string `json:"term"`
	RunBytes      int64  `json:"run_bytes"`
	Measured      bool   `json:"measured"` // false: the run does not show this term; RunBytes is the estimate's
	EstimateBytes int64  `json:"run_estimate_bytes"`
	PredictBytes  int64  `json:"predicted_bytes"`
	DiffBytes     int64  `json:"diff_bytes"` // predicted - run
	How           string `json:"how"`
}

// PhaseRow is one phase's peak: the run's (when it showed it) and the
// prediction, with where in the phase the estimate puts it.
type PhaseRow struct {
	Name         estimate.PhaseName `json:"name"`
	RunBytes     int64              `json:"run_bytes"`
	Measured     bool               `json:"measured"`
	PredictBytes int64              `json:"predicted_bytes"`
	At           string             `json:"at,omitempty"`
}

// Result is a prediction of a changed job from a run of it: the document
// of `ptscope estimate --from RUN [flags]`.
type Result struct {
	envelope.Header
	Run    *Run           `json:"run"`
	Model  estimate.Model `json:"model"`
	Params int64          `json:"params"`
	// RunSetup is the run's job as the estimate describes it; Setup the
	// changed one, Changes the flags that differ ("micro-batch 8 -> 16").
	RunSetup estimate.Setup  `json:"run_setup"`
	Setup    estimate.Setup  `json:"setup"`
	Changes  []string        `json:"changes"`
	Device   estimate.Device `json:"device"`
	Rows     []Row           `json:"rows"`
	Phases   []PhaseRow      `json:"phases"`
	// The prediction's summary (Summary.PeakAllocatedBytes and so on) and
	// the run's own numbers beside it.
	estimate.Summary
	RunPeakAllocatedBytes int64 `json:"run_peak_allocated_bytes"`
	RunPeakReservedBytes  int64 `json:"run_peak_reserved_bytes"`
	RunDeviceTotalBytes   int64 `json:"run_device_total_bytes"`
	// Notes say what the run did not tell and what was assumed instead.
	Notes []string `json:"notes"`
	// Proposals are the cheapest changes that fit, when the run (or the
	// changed job) does not fit its device or fits tightly.
	Proposals []Proposal `json:"proposals,omitempty"`
}

// Predictor carries a run's calibration to changed setups.
type Predictor struct {
	run   *Run
	model estimate.Model
	job   estimate.Setup // the run's job as given: changes start from it
	base  estimate.Setup // ... as the estimate filled it in
	dev   estimate.Device
	meas  measured
	baseR *estimate.Result
	cal   calibration
	notes []string
}

// NewPredictor sets the estimate of the run's job (model m, setup base)
// against the run. dev is the device of the verdicts.
func NewPredictor(r *Run, m estimate.Model, base estimate.Setup, dev estimate.Device, notes []string) (*Predictor, error) {
	br, err := estimate.Estimate(m, base, dev)
	if err != nil {
		return nil, fmt.Errorf("the run's job: %w", err)
	}
	p := &Predictor{run: r, model: br.Model, job: base, base: br.Setup, dev: dev, meas: measure(r), baseR: br, notes: notes}
	p.calibrate()
	return p, nil
}

// Base is the run's job: change its setup's fields and Predict. (The
// estimate fills in what a setup leaves to defaults, such as the gradients'
// dtype; those follow a change of precision when they are left unset here.)
func (p *Predictor) Base() (estimate.Model, estimate.Setup) { return p.model, p.job }

// predictPhase is a phase of the changed job with the run's calibration.
func (p *Predictor) predictPhase(ph estimate.Phase) int64 {
	var n int64
	for _, t := range ph.Terms {
		k := classOf(ph.Name, t.Name)
		r := p.cal.ratio[k]
		if k == cTemp {
			if tr, ok := p.cal.tempR[ph.Name]; ok {
				r = tr
			}
		}
		n += scale(t.Bytes, r)
	}
	return n + p.cal.residual[ph.Name]
}

// classBytes sums a phase's terms of one class.
func classBytes(ph estimate.Phase, k class) int64 {
	var n int64
	for _, t := range ph.Terms {
		if classOf(ph.Name, t.Name) == k {
			n += t.Bytes
		}
	}
	return n
}

// Predict is the changed job s's memory with the run's measurements
// carried over.
func (p *Predictor) Predict(s estimate.Setup) (*Result, error) {
	nr, err := estimate.Estimate(p.model, s, p.dev)
	if err != nil {
		return nil, err
	}
	res := &Result{Header: envelope.NewHeader("estimate"), Run: p.run, Model: nr.Model, Params: nr.Params,
		RunSetup: p.base, Setup: nr.Setup, Device: p.dev, Notes: append([]string{}, p.notes...)}
	res.Changes = Changes(p.base, nr.Setup)
	bt, nt := p.baseR.Top(), nr.Top()
	peak, peakPhase := p.phaseRows(res, bt, nt)
	p.stateRows(res, nr)
	runPeak := p.peakRows(res, bt, peakPhase, peak)
	frag := p.deviceRows(res, bt, nt, peak, runPeak)
	res.PeakAllocatedBytes, res.HostBytes, res.PeakPhase = peak, nt.HostBytes, peakPhase.Name
	if p.dev.MemoryBytes > 0 {
		head := p.dev.MemoryBytes - res.DeviceTotalBytes
		res.HeadroomBytes = &head
		switch {
		case head < 0:
			res.Verdict = estimate.DoesNotFit
		case head < frag:
			// fragmentation varies from run to run: it fits, unless it doubles
			res.Verdict = estimate.Tight
		default:
			res.Verdict = estimate.Fits
		}
	}
	p.addNotes(res, peakPhase)
	return res, nil
}

// phaseRows predicts each phase's peak beside the run's; it returns the
// largest and its phase.
func (p *Predictor) phaseRows(res *Result, bt, nt *estimate.Rank) (int64, estimate.Phase) {
	var peak int64
	var peakPhase estimate.Phase
	for i, ph := range nt.Phases {
		v := p.predictPhase(ph)
		row := PhaseRow{Name: ph.Name, PredictBytes: v, At: ph.At}
		if i < len(bt.Phases) {
			if pk, ok := p.meas.peaks[ph.Name]; ok {
				row.RunBytes, row.Measured = pk.bytes, true
			} else {
				row.RunBytes = p.predictPhase(bt.Phases[i])
			}
		}
		res.Phases = append(res.Phases, row)
		if v > peak {
			peak, peakPhase = v, ph
		}
	}
	return peak, peakPhase
}

// stateRows are the model states and what forward keeps, each the run's
// measurement times the estimate's change.
func (p *Predictor) stateRows(res *Result, nr *estimate.Result) {
	c := &p.cal
	nms := nr.Top().ModelStates
	row := func(k class, term string, est int64) {
		r := Row{Term: term, EstimateBytes: c.est[k], RunBytes: c.run[k], Measured: c.measured[k],
			PredictBytes: scale(est, c.ratio[k])}
		if !r.Measured {
			r.RunBytes = c.est[k]
		}
		r.How = howCarried(c.how[k], c.measured[k], c.est[k], est)
		r.DiffBytes = r.PredictBytes - r.RunBytes
		if r.RunBytes != 0 || r.PredictBytes != 0 {
			res.Rows = append(res.Rows, r)
		}
	}
	row(cParams, "parameters", nms.ParametersBytes+nms.MasterWeightsBytes)
	row(cGrads, "gradients", nms.GradientsBytes)
	row(cOpt, "optimizer state", nms.OptimizerStateBytes+nms.FP32GradCopyBytes)
	row(cDDP, "DDP buckets", nms.DDPBucketsBytes)
	row(cOther, "workspaces, buffers, batch", p.dev.CublasWorkspaceBytes)
	row(cSaved, "kept after forward", savedAfterForward(nr))
	row(cHeld, "held after backward", heldAfterBackward(nr))
}

// peakRows are the temporaries at the peak and the peak; it returns the
// run's peak (the prediction of its own job when the run never reached it).
func (p *Predictor) peakRows(res *Result, bt *estimate.Rank, peakPhase estimate.Phase, peak int64) int64 {
	m := p.meas
	runPeak := m.peak
	runPeakOK := runPeak > 0 && m.complete
	basePeak := bt.Phases[0]
	for _, ph := range bt.Phases[1:] {
		if p.predictPhase(ph) > p.predictPhase(basePeak) {
			basePeak = ph
		}
	}
	tempOf := func(ph estimate.Phase) int64 {
		return scale(classBytes(ph, cTemp), p.tempRatio(ph.Name)) + p.cal.residual[ph.Name]
	}
	bTemp, nTemp := tempOf(basePeak), tempOf(peakPhase)
	how := fmt.Sprintf("the estimate's temporaries at the peak (%s: %s)", peakPhase.Name, peakPhase.At)
	if _, ok := m.peaks[peakPhase.Name]; ok {
		how += fmt.Sprintf(", scaled to meet the run's %s peak", peakPhase.Name)
	}
	res.Rows = append(res.Rows, Row{Term: "temporaries at the peak", RunBytes: bTemp, EstimateBytes: classBytes(basePeak, cTemp),
		PredictBytes: nTemp, DiffBytes: nTemp - bTemp, How: how})
	if !runPeakOK {
		runPeak = p.predictPhase(basePeak)
	}
	res.Rows = append(res.Rows, Row{Term: "peak allocated", RunBytes: runPeak, Measured: runPeakOK, EstimateBytes: bt.PeakAllocatedBytes,
		PredictBytes: peak, DiffBytes: peak - runPeak, How: peakHow(runPeakOK, p.run)})
	return runPeak
}

// deviceRows are the reserved memory and the device's total: the run's
// fragmentation scaled with the non-persistent part of the peak
// (expandable segments leave almost none), and what lives outside the
// allocator as the run's device showed it, NCCL changed with the layout.
// It sets the summary's reserved and device totals and returns the
// predicted fragmentation.
func (p *Predictor) deviceRows(res *Result, bt, nt *estimate.Rank, peak, runPeak int64) int64 {
	r := p.run
	persist := func(t *estimate.Rank) int64 {
		ms := t.ModelStates
		return ms.ParametersBytes + ms.MasterWeightsBytes + ms.OptimizerStateBytes + ms.FP32GradCopyBytes + ms.DDPBucketsBytes
	}
	dynB, dynN := max(runPeak-persist(bt), 1), max(peak-persist(nt), 0)
	frag, fragHow, fragOK := p.fragmentation(res.Setup.ExpandableSegments, dynB, dynN)
	estFrag := termOf(bt.Terms, "allocator_segments") + termOf(bt.Terms, "fragmentation_allowance")
	runFrag := r.MaxReservedBytes - r.MaxAllocatedBytes
	if !fragOK {
		runFrag = estFrag
	}
	res.Rows = append(res.Rows, Row{Term: "reserved beyond allocated", RunBytes: runFrag, Measured: fragOK,
		EstimateBytes: estFrag, PredictBytes: frag, DiffBytes: frag - runFrag, How: fragHow})
	reserved := roundUp(peak+frag, 2<<20)
	runReserved := r.MaxReservedBytes
	if !fragOK {
		runReserved = roundUp(runPeak+runFrag, 2<<20)
	}
	res.Rows = append(res.Rows, Row{Term: "peak reserved", RunBytes: runReserved, Measured: fragOK,
		EstimateBytes: bt.PeakReservedBytes, PredictBytes: reserved, DiffBytes: reserved - runReserved, How: "peak allocated + reserved beyond it"})
	ctxB := termOf(bt.Terms, "cuda_context") + termOf(bt.Terms, "nccl_buffers")
	ctxN := termOf(nt.Terms, "cuda_context") + termOf(nt.Terms, "nccl_buffers")
	outside, outsideOK := ctxB, false
	if u := r.MaxDeviceUsedBytes - r.MaxReservedBytes; r.MaxDeviceUsedBytes > 0 && r.MaxReservedBytes > 0 && u > 0 && r.Mode != bundle.ModeFake {
		outside, outsideOK = u, true
	}
	outsideN := outside + ctxN - ctxB
	res.Rows = append(res.Rows, Row{Term: "outside the allocator", RunBytes: outside, Measured: outsideOK,
		EstimateBytes: ctxB, PredictBytes: outsideN, DiffBytes: outsideN - outside,
		How: ifStr(outsideOK, "the device's memory in use (live samples) beyond the reserved peak; NCCL buffers changed as the layout changes them",
			"estimated: the CUDA context and NCCL buffers of the estimate")})
	device, runDevice := reserved+outsideN, runReserved+outside
	res.Rows = append(res.Rows, Row{Term: "device total", RunBytes: runDevice, Measured: fragOK && outsideOK,
		EstimateBytes: bt.DeviceTotalBytes, PredictBytes: device, DiffBytes: device - runDevice, How: "peak reserved + outside the allocator"})
	res.PeakReservedBytes, res.DeviceTotalBytes = reserved, device
	res.RunPeakAllocatedBytes, res.RunPeakReservedBytes, res.RunDeviceTotalBytes = runPeak, runReserved, runDevice
	return frag
}

// addNotes says what the prediction could not take from the run.
func (p *Predictor) addNotes(res *Result, peakPhase estimate.Phase) {
	m := p.meas
	if _, ok := m.peaks[peakPhase.Name]; !ok && m.complete {
		res.Notes = append(res.Notes, fmt.Sprintf("the %s phase's own peak: the run's peak counter never rose in it; its temporaries are estimated", peakPhase.Name))
	}
	if o := p.run.OOM; o != nil && m.oomRecord {
		res.Notes = append(res.Notes, fmt.Sprintf("the run ran out of memory at step %d in its %s with %s allocated, asking for %s more",
			o.Step, o.Phase, units.Bytes(m.oomAt), units.Bytes(o.RequestedBytes)))
	}
	sort.Strings(res.Notes[len(p.notes):])
}

func (p *Predictor) tempRatio(ph estimate.PhaseName) float64 {
	if r, ok := p.cal.tempR[ph]; ok {
		return r
	}
	return 1
}

// fragmentation is what the changed job reserves beyond its allocated
// peak: the run's, in proportion to the non-persistent part of the peak,
// unless the change turns expandable segments on (or off).
func (p *Predictor) fragmentation(expandable bool, dynB, dynN int64) (int64, string, bool) {
	r := p.run
	runFrag := r.MaxReservedBytes - r.MaxAllocatedBytes
	// a run that ran out of memory (or completed no step) never reached
	// the steady state's fragmentation
	ok := r.MaxReservedBytes > 0 && runFrag >= 0 && r.Mode != bundle.ModeFake && p.meas.complete && r.OOM == nil
	switch {
	case expandable && !r.ExpandableSegments:
		// one mapped range grown in 2 MiB pages: what is left is the
		// rounding of the pages and the small pool
		return expandableOverhead(dynN), "expandable segments: 0.25% of the non-persistent peak (measured 0.23% on the H100, docs/estimate.md)", ok
	case !ok:
		f := int64(float64(dynN) * estimate.FragmentationRatio)
		return f, fmt.Sprintf("estimated: %.0f%% of the non-persistent peak (the run never reached a steady step's fragmentation)", 100*estimate.FragmentationRatio), false
	case !expandable && r.ExpandableSegments:
		f := int64(float64(dynN) * estimate.FragmentationRatio)
		return f, fmt.Sprintf("the run had expandable segments: %.0f%% of the non-persistent peak without them (the estimate's allowance)", 100*estimate.FragmentationRatio), true
	}
	f := int64(math.Round(float64(runFrag) * float64(dynN) / float64(dynB)))
	return f, fmt.Sprintf("the run's max reserved minus max allocated (%.1f%% of its non-persistent peak), in proportion to the non-persistent peak", 100*float64(runFrag)/float64(dynB)), true
}

func expandableOverhead(dyn int64) int64 { return int64(float64(dyn) * estimate.ExpandableRatio) }

func termOf(ts []estimate.Term, name string) int64 {
	for _, t := range ts {
		if t.Name == name {
			return t.Bytes
		}
	}
	return 0
}

func roundUp(n, m int64) int64 { return (n + m - 1) / m * m }

func ifStr(b bool, t, f string) string {
	if b {
		return t
	}
	return f
}

func howCarried(how string, measured bool, base, now int64) string {
	if !measured {
		return how
	}
	switch {
	case base == now:
		return how + "; unchanged"
	case base > 0:
		return fmt.Sprintf("%s, times the estimate's change (x%.3f)", how, float64(now)/float64(base))
	}
	return how
}

func peakHow(ok bool, r *Run) string {
	switch {
	case ok:
		return "the run's max_memory_allocated (phases and process.json); predicted: the largest phase"
	case r.OOM != nil:
		return "the run ran out of memory before its peak: its job's peak is the estimate with the run's measurements"
	}
	return "the run completed no step: its job's peak is the estimate with the run's measurements"
}

// Changes lists the setup fields that differ between the run's job and a
// changed one, as flags ("micro-batch 8 -> 16").
func Changes(a, b estimate.Setup) []string {
	var out []string
	add := func(name string, x, y any) {
		if fmt.Sprint(x) != fmt.Sprint(y) {
			out = append(out, fmt.Sprintf("%s %v -> %v", name, x, y))
		}
	}
	add("micro-batch", a.MicroBatch, b.MicroBatch)
	add("seq", a.Seq, b.Seq)
	add("grad-accum", a.GradAccum, b.GradAccum)
	add("dtype", a.DType, b.DType)
	add("recompute", a.Recompute, b.Recompute)
	add("attention", a.Attention, b.Attention)
	add("optimizer", a.Optimizer, b.Optimizer)
	add("compile", a.Compile, b.Compile)
	add("dp", a.DP, b.DP)
	add("tp", a.TP, b.TP)
	add("tp-plan", a.TPPlan, b.TPPlan)
	add("pp", a.PP, b.PP)
	add("cp", a.CP, b.CP)
	add("ep", a.EP, b.EP)
	add("sp", a.SP, b.SP)
	add("zero", a.Zero, b.Zero)
	add("fsdp", a.FSDP, b.FSDP)
	add("param-dtype", a.ParamDType, b.ParamDType)
	add("reduce-dtype", a.ReduceDType, b.ReduceDType)
	add("offload", a.Offload, b.Offload)
	add("ddp", a.DDP, b.DDP)
	add("master-weights", a.MasterWeights, b.MasterWeights)
	add("keep-logits", keepName(a), keepName(b))
	add("expandable-segments", a.ExpandableSegments, b.ExpandableSegments)
	return out
}

func keepName(s estimate.Setup) string {
	switch {
	case s.KeepLogitsStep && s.KeepLogits:
		return "step"
	case s.KeepLogits:
		return "backward"
	}
	return "none"
}
