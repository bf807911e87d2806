package estreport

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/ptscope/ptscope/internal/estimate"
	"github.com/ptscope/ptscope/internal/report"
	"github.com/ptscope/ptscope/internal/units"
)

type writerBuf = bytes.Buffer

// printer writes lines that fit o.Width and remembers the first error.
type printer struct {
	w   io.Writer
	o   report.TextOptions
	err error
}

func (p *printer) line(s string) {
	if p.err == nil {
		_, p.err = io.WriteString(p.w, s+"\n")
	}
}

// para wraps s to the width, continuation lines indented by indent.
func (p *printer) para(first, indent, s string) {
	for _, l := range report.Wrap(s, p.o.Width, first, indent) {
		p.line(l)
	}
}

func (p *printer) blank() { p.line("") }

func (p *printer) section(title string) {
	p.blank()
	for _, l := range report.Wrap(title, p.o.Width, "", "  ") {
		p.line(p.o.Bold(l))
	}
}

// table writes t indented by two spaces, fitted to the width.
func (p *printer) table(t *report.Table) {
	if p.err != nil {
		return
	}
	t.MaxWidth = p.o.Width - 2
	var b strings.Builder
	if p.err = t.Write(&b); p.err != nil {
		return
	}
	for _, l := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
		p.line("  " + l)
	}
}

// Params formats a parameter count: 124.4M, 8.03B.
func Params(n int64) string {
	switch {
	case n >= 1e9:
		return strconv.FormatFloat(float64(n)/1e9, 'f', 2, 64) + "B"
	case n >= 1e6:
		return strconv.FormatFloat(float64(n)/1e6, 'f', 1, 64) + "M"
	}
	return strconv.FormatInt(n, 10)
}

// Precision describes how the setup stores and computes: "bf16 autocast
// (fp32 weights)", "pure bf16 (bf16 weights and optimizer state)", ...
func Precision(s estimate.Setup) string {
	if s.FSDP && s.ParamDType != s.DType.Weights() && s.ParamDType.Bytes() > 0 {
		return fmt.Sprintf("FSDP2 mixed precision (%s weights sharded, %s params gathered, %s gradient reduction)",
			s.DType.Weights(), s.ParamDType, s.ReduceDType)
	}
	switch s.DType {
	case estimate.BF16Mixed:
		return "bf16 autocast (fp32 weights)"
	case estimate.FP16Mixed:
		return "fp16 autocast (fp32 weights, GradScaler)"
	case estimate.BF16True, estimate.FP16True:
		d := s.DType.Compute().String()
		if s.MasterWeights {
			return fmt.Sprintf("%s weights with fp32 master weights", d)
		}
		if s.ForwardOnly {
			return "pure " + d
		}
		return fmt.Sprintf("pure %s (%s weights and optimizer state)", d, d)
	}
	return "fp32 (no mixed precision)"
}

func optimizerText(s estimate.Setup) string {
	if s.ForwardOnly {
		return "inference under torch.no_grad"
	}
	o := map[estimate.Optimizer]string{estimate.AdamW: "AdamW", estimate.Adam: "Adam",
		estimate.SGD: "SGD with momentum", estimate.Adafactor: "Adafactor", estimate.AdamW8bit: "8-bit AdamW",
		estimate.AdamWFused: "fused AdamW"}[s.Optimizer]
	if o == "" {
		o = s.Optimizer.String()
	}
	if s.Offload != estimate.OffloadNone {
		o += " on the CPU"
	}
	return o
}

func attentionText(s estimate.Setup) string {
	if s.Attention == estimate.AttentionEager {
		return "eager attention"
	}
	return "SDPA attention"
}

func recomputeText(s estimate.Setup) string {
	switch s.Recompute {
	case estimate.RecomputeFull:
		return "full recompute (activation checkpointing)"
	case estimate.RecomputeSelective:
		return "selective recompute"
	}
	return "no recompute"
}

// Assumptions is the first line of a report: precision, optimizer,
// attention and recompute.
func Assumptions(s estimate.Setup) string {
	a := []string{Precision(s), optimizerText(s), attentionText(s)}
	if !s.ForwardOnly {
		a = append(a, recomputeText(s))
	}
	if s.Compile {
		a = append(a, "torch.compile")
	}
	return strings.Join(a, ", ")
}

// Layout is the parallel layout, or "1 GPU".
func Layout(s estimate.Setup) string {
	var l []string
	if s.DP > 1 {
		d := fmt.Sprintf("dp %d", s.DP)
		switch {
		case s.FSDP:
			d += " (FSDP2)"
		case s.Zero > 0:
			d += fmt.Sprintf(" (ZeRO-%d)", s.Zero)
		case !s.ForwardOnly:
			d += ifs(s.DDPBucketView, " (DDP, gradient_as_bucket_view)", " (DDP)")
		}
		l = append(l, d)
	} else if s.FSDP {
		l = append(l, "FSDP2 on 1 rank")
	} else if s.DDP {
		l = append(l, ifs(s.DDPBucketView, "DDP on 1 rank (gradient_as_bucket_view)", "DDP on 1 rank"))
	}
	if s.TP > 1 {
		l = append(l, fmt.Sprintf("tp %d (%s plan%s)", s.TP, s.TPPlan, ifs(s.SP, ", sequence parallel", "")))
	}
	if s.PP > 1 {
		p := fmt.Sprintf("pp %d (%d micro-batches", s.PP, s.MicroBatches)
		if s.VPP > 1 {
			p += fmt.Sprintf(", %d virtual stages", s.VPP)
		}
		l = append(l, p+")")
	}
	if s.CP > 1 {
		l = append(l, fmt.Sprintf("cp %d", s.CP))
	}
	if s.EP > 1 {
		l = append(l, fmt.Sprintf("ep %d", s.EP))
	}
	if s.Offload != estimate.OffloadNone {
		l = append(l, "offload "+s.Offload.String())
	}
	if len(l) == 0 {
		return "1 GPU"
	}
	return strings.Join(l, ", ")
}

func ifs(b bool, t, f string) string {
	if b {
		return t
	}
	return f
}

func exact(n int64) string {
	return fmt.Sprintf("%s (%s B)", units.Bytes(n), units.Count(n))
}

// VerdictText is the verdict in words: "FITS", "FITS, tightly", "DOES NOT FIT".
func VerdictText(v estimate.Verdict) string {
	switch v {
	case estimate.Fits:
		return "FITS"
	case estimate.Tight:
		return "FITS, tightly"
	case estimate.DoesNotFit:
		return "DOES NOT FIT"
	}
	return "no verdict"
}

func writeEstimate(w io.Writer, r *estimate.Result, o report.TextOptions, explain bool) error {
	p := &printer{w: w, o: o}
	s, top := r.Setup, r.Top()
	p.para("", "  ", fmt.Sprintf("%s, %s params: %s", r.Model.Name, Params(r.Params), Assumptions(s)))
	mode := "training"
	if s.ForwardOnly {
		mode = "inference"
	}
	shape := fmt.Sprintf("%s, seq %d x micro-batch %d", mode, s.Seq, s.MicroBatch)
	if s.GradAccum > 1 {
		shape += fmt.Sprintf(", grad-accum %d", s.GradAccum)
	}
	p.para("", "  ", shape+", "+Layout(s))

	if len(r.Ranks) > 1 {
		p.section("Ranks (one per pipeline stage; * the most loaded)")
		// the reserved column goes first when the terminal is narrow
		wide := o.Width >= 72
		t := &report.Table{Header: []string{"rank", "params", "allocated", "reserved", "device total", "peak in"}}
		if !wide {
			t.Header = []string{"rank", "params", "allocated", "device total", "peak in"}
		}
		for i, rk := range r.Ranks {
			row := []string{rk.Name + ifs(i == r.TopRank, " *", ""), Params(rk.Params), units.Bytes(rk.PeakAllocatedBytes),
				units.Bytes(rk.PeakReservedBytes), units.Bytes(rk.DeviceTotalBytes), rk.PeakPhase.String()}
			if !wide {
				row = append(row[:3], row[4:]...)
			}
			t.Rows = append(t.Rows, row)
		}
		p.table(t)
	}

	title := "Peak"
	if len(r.Ranks) > 1 {
		title += " of the most loaded rank, " + top.Name
	}
	p.section(title)
	sum := &report.Table{Rows: [][]string{
		{"peak allocated", exact(top.PeakAllocatedBytes), "~ max_memory_allocated()"},
		{"peak reserved", exact(top.PeakReservedBytes), "~ max_memory_reserved()"},
		{"device total", exact(top.DeviceTotalBytes), "+ CUDA context, NCCL"},
	}, Align: []report.Align{report.Left, report.Right, report.Left}}
	if top.HostBytes > 0 {
		sum.Rows = append(sum.Rows, []string{"host memory", exact(top.HostBytes), "CPU RAM, per rank"})
	}
	p.table(sum)
	if r.Verdict != estimate.VerdictUnknown {
		head := *r.HeadroomBytes
		how := fmt.Sprintf("with %s headroom (%s)", units.Bytes(head), units.Percent(float64(head)/float64(r.Device.MemoryBytes)))
		if head < 0 {
			how = fmt.Sprintf("by %s", units.Bytes(-head))
		}
		p.para("  ", "    ", fmt.Sprintf("verdict: %s on %s (%s) %s", VerdictText(r.Verdict), r.Device.Name, units.Bytes(r.Device.MemoryBytes), how))
	} else {
		p.line("  verdict: give --gpu or --device-memory for a fit verdict")
	}

	at := top.PeakPhase.String()
	for _, ph := range top.Phases {
		if ph.Name == top.PeakPhase && ph.At != "" {
			at += ", " + ph.At
		}
	}
	p.section(fmt.Sprintf("At the peak (%s)", at))
	t := &report.Table{Header: []string{"term", "size", "bytes", "where"}}
	for _, tm := range top.Terms {
		if tm.Bytes == 0 && tm.Name != "activations" && !explain {
			continue
		}
		t.Rows = append(t.Rows, []string{tm.Name, units.Bytes(tm.Bytes), units.Count(tm.Bytes), tm.Where.String()})
	}
	p.table(t)
	writeModelStates(p, top)
	writeActivations(p, s, top.Activations)
	writePhases(p, top, explain)
	if explain {
		writeExplain(p, top)
	}
	if len(r.Findings) > 0 {
		p.section("Findings")
		for _, f := range r.Findings {
			for _, l := range o.FindingLines(f, "  ") {
				p.line(l)
			}
		}
	}
	return p.err
}

func writeModelStates(p *printer, top *estimate.Rank) {
	ms := top.ModelStates
	parts := []string{"parameters " + units.Bytes(ms.ParametersBytes)}
	for _, x := range []struct {
		name string
		b    int64
	}{{"gradients", ms.GradientsBytes}, {"optimizer state", ms.OptimizerStateBytes}, {"master weights", ms.MasterWeightsBytes},
		{"fp32 gradient copy", ms.FP32GradCopyBytes}, {"DDP buckets", ms.DDPBucketsBytes}} {
		if x.b > 0 {
			parts = append(parts, x.name+" "+units.Bytes(x.b))
		}
	}
	s := "model states on this rank: " + strings.Join(parts, ", ")
	if top.AllocatorRoundingBytes > 0 {
		s += fmt.Sprintf(" (allocator rounding included: %s)", units.Bytes(top.AllocatorRoundingBytes))
	}
	p.blank()
	p.para("", "  ", s)
}

func writeActivations(p *printer, s estimate.Setup, a estimate.Activations) {
	var line string
	switch {
	case s.ForwardOnly:
		line = "activations: none kept for backward (inference); one layer's transients are under temporaries"
		if a.TotalBytes > 0 {
			line += fmt.Sprintf("; the KV cache holds %s", units.Bytes(a.TotalBytes))
		}
	case a.RecomputedLayerBytes > 0:
		line = fmt.Sprintf("activations: %s per layer kept (full recompute: the layer input) x %d layers x %s micro-batches = %s; backward rebuilds one layer at a time: %s (attention %s, MLP %s, norms %s)",
			units.Bytes(a.PerLayerBytes), a.Layers, inflight(a.InFlight), units.Bytes(a.LayersTotalBytes), units.Bytes(a.RecomputedLayerBytes),
			units.Bytes(a.AttentionBytes), units.Bytes(a.MLPBytes), units.Bytes(a.NormBytes))
	default:
		line = fmt.Sprintf("activations: %s per layer (attention %s, MLP %s, norms %s) x %d layers x %s micro-batches = %s",
			units.Bytes(a.PerLayerBytes), units.Bytes(a.AttentionBytes), units.Bytes(a.MLPBytes), units.Bytes(a.NormBytes), a.Layers,
			inflight(a.InFlight), units.Bytes(a.LayersTotalBytes))
	}
	p.para("", "  ", line)
	if a.LogitsBytes > 0 && !s.ForwardOnly {
		p.para("", "  ", fmt.Sprintf("logits %s, saved by the loss %s", units.Bytes(a.LogitsBytes), units.Bytes(a.LossBytes)))
	}
}

func inflight(f float64) string {
	if f == float64(int64(f)) {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'f', 2, 64)
}

func writePhases(p *printer, top *estimate.Rank, explain bool) {
	p.section("Phases (allocated at each phase's peak; * the step's peak: the largest, not the sum)")
	t := &report.Table{Header: []string{"phase", "allocated", "at"}}
	for _, ph := range top.Phases {
		t.Rows = append(t.Rows, []string{ph.Name.String() + ifs(ph.Name == top.PeakPhase, " *", ""), units.Bytes(ph.Bytes), ph.At})
		if explain {
			for _, tm := range ph.Terms {
				if tm.Bytes != 0 {
					t.Rows = append(t.Rows, []string{"  " + tm.Name, units.Bytes(tm.Bytes), ""})
				}
			}
		}
	}
	p.table(t)
}

// writeExplain lists every term's formula and what one layer saves.
func writeExplain(p *printer, top *estimate.Rank) {
	p.section("Formulas")
	for _, tm := range top.Terms {
		p.para("  ", "      ", fmt.Sprintf("%s (%s): %s", tm.Name, tm.Where, tm.Formula))
	}
	a := top.Activations
	p.para("  ", "      ", fmt.Sprintf("one residual-stream tensor: %s = %s", units.Bytes(a.ResidualTensorBytes), a.ResidualTensorHow))
	items := append(append(append([]estimate.ActItem{}, a.PerLayer...), a.Embedding...), a.Head...)
	if len(items) == 0 {
		return
	}
	p.section("Saved for backward per micro-batch (per layer, then embedding and head)")
	for _, it := range items {
		p.para("  ", "      ", fmt.Sprintf("%s (%s) %s: %s", it.Name, it.Group, units.Bytes(it.Bytes), it.Formula))
	}
}
