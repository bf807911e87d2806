package estimate

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
)

// ladderRow is one line of testdata/hf_ladder.jsonl (scripts/gpu/hf_ladder.py, measured on an
// H100 with PyTorch 2.11 and transformers 5.17): a Hugging Face model built from hf_config,
// trained or run as setup says, and what torch.cuda measured.
type ladderRow struct {
	Kind     string          `json:"kind"`
	Row      string          `json:"row"`
	HFConfig json.RawMessage `json:"hf_config"`
	Setup    struct {
		Precision  string `json:"precision"` // amp_bf16 | bf16 | fp32 | fsdp_mp_bf16
		Mode       string `json:"mode"`      // train | infer
		Attn       string `json:"attn"`      // sdpa | eager
		GradCkpt   bool   `json:"grad_ckpt"`
		MicroBatch int    `json:"micro_batch"`
		Seq        int    `json:"seq"`
		Dist       string `json:"dist"` // fsdp2 | fsdp2_offload | tp_hf | tp_megatron | ddp | ddp_bucket_view
		World      int    `json:"world"`
		Compile    bool   `json:"compile"`
	} `json:"setup"`
	Measured struct {
		MaxAllocated        int64            `json:"max_memory_allocated"`
		MaxReserved         int64            `json:"max_memory_reserved"`
		Parameters          int64            `json:"parameters"`
		ParameterBytes      int64            `json:"parameter_bytes"`
		GradientBytes       int64            `json:"gradient_bytes"`
		OptimizerStateBytes int64            `json:"optimizer_state_bytes"`
		LogitsBytes         int64            `json:"logits_bytes"`
		KVCacheBytes        int64            `json:"kv_cache_bytes"`
		AtStepStart         int64            `json:"allocated_at_step_start"`
		AfterForward        int64            `json:"allocated_after_forward"`
		PhasePeaks          map[string]int64 `json:"phase_peak_allocated"`
		Host                *struct {
			ParameterBytes      int64 `json:"parameter_bytes"`
			GradientBytes       int64 `json:"gradient_bytes"`
			OptimizerStateBytes int64 `json:"optimizer_state_bytes"`
		} `json:"host"`
	} `json:"measured"`
	Error string `json:"error"`
}

// ladderFiles are the measured ladders: hf_ladder.jsonl (scripts/gpu/hf_ladder.sh) and
// estimate_setups.jsonl (scripts/gpu/estimate_tp.sh: TP plans, DDP, CPU offload,
// torch.compile).
var ladderFiles = []string{"testdata/hf_ladder.jsonl", "testdata/estimate_setups.jsonl"}

func readLadders(t testing.TB) []ladderRow {
	t.Helper()
	var rows []ladderRow
	for _, p := range ladderFiles {
		rows = append(rows, readLadder(t, p)...)
	}
	return rows
}

func readLadder(t testing.TB, path string) []ladderRow {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []ladderRow
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r ladderRow
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if r.Kind == "row" && r.Error == "" && r.Measured.MaxAllocated > 0 {
			rows = append(rows, r)
		}
	}
	return rows
}

// modelAndSetup maps a ladder row to the estimator's inputs, as a user would describe the run:
// the model's config.json and the flags naming the setup.
func (r ladderRow) modelAndSetup() (Model, Setup, error) {
	m, err := ReadHFConfig(bytes.NewReader(r.HFConfig), r.Row)
	if err != nil {
		return m, Setup{}, err
	}
	s := DefaultSetup()
	st := r.Setup
	s.Seq, s.MicroBatch = st.Seq, st.MicroBatch
	switch st.Precision {
	case "amp_bf16":
		s.DType = BF16Mixed
	case "bf16":
		s.DType = BF16True
	case "fp32":
		s.DType = FP32
	case "fsdp_mp_bf16":
		s.DType, s.ParamDType, s.ReduceDType = FP32, BF16, F32
	default:
		return m, s, fmt.Errorf("precision %q", st.Precision)
	}
	s.ForwardOnly = st.Mode == "infer"
	if st.Attn == "eager" {
		s.Attention = AttentionEager
	}
	if st.GradCkpt {
		s.Recompute = RecomputeFull
	}
	s.Compile = st.Compile
	switch st.Dist {
	case "":
	case "fsdp2":
		s.FSDP, s.DP = true, st.World
	case "fsdp2_offload":
		s.FSDP, s.DP, s.Offload = true, st.World, OffloadParams
	case "ddp":
		s.DP, s.DDP = st.World, true
	case "ddp_bucket_view":
		s.DP, s.DDP, s.DDPBucketView = st.World, true, true
	case "tp_hf":
		s.TP, s.TPPlan = st.World, TPPlanHF
	case "tp_megatron":
		s.TP, s.TPPlan = st.World, TPPlanMegatron
	default:
		return m, s, fmt.Errorf("dist %q", st.Dist)
	}
	// the script holds the model output through backward and drops it before the step
	s.KeepLogits, s.KeepLogitsStep = true, false
	return m, s, nil
}

// TestHFLadder holds every row of the ladder within 5% of torch.cuda.max_memory_allocated.
func TestHFLadder(t *testing.T) {
	rows := readLadders(t)
	if len(rows) < 20 {
		t.Fatalf("only %d ladder rows", len(rows))
	}
	dev, _ := GPU("h100-80gb")
	for _, row := range rows {
		t.Run(row.Row, func(t *testing.T) {
			m, s, err := row.modelAndSetup()
			if err != nil {
				t.Fatal(err)
			}
			if m.Params() != row.Measured.Parameters {
				t.Errorf("%d params, the measured model has %d", m.Params(), row.Measured.Parameters)
			}
			r, err := Estimate(m, s, dev)
			if err != nil {
				t.Fatal(err)
			}
			got, want := r.PeakAllocatedBytes, row.Measured.MaxAllocated
			if e := float64(got)/float64(want) - 1; math.Abs(e) > 0.05 {
				t.Errorf("estimate %d B, measured %d B (%+.2f%%)", got, want, 100*e)
			}
			// each phase's peak too (the script reset the peak before each; it dropped the
			// model output before backward, which the whole step holds)
			if h := row.Measured.Host; h != nil {
				want := h.ParameterBytes + h.GradientBytes + h.OptimizerStateBytes
				if e := float64(r.HostBytes)/float64(want) - 1; math.Abs(e) > 0.05 {
					t.Errorf("host memory: estimate %d B, measured %d B of parameters, gradients and optimizer state (%+.2f%%)", r.HostBytes, want, 100*e)
				}
			}
			for _, p := range r.Top().Phases {
				key := strings.TrimSuffix(p.Name.String(), "_step")
				meas, ok := row.Measured.PhasePeaks[key]
				if !ok {
					continue
				}
				if p.Name == Backward {
					meas += row.Measured.LogitsBytes
				}
				if e := float64(p.Bytes)/float64(meas) - 1; math.Abs(e) > 0.05 {
					t.Errorf("%s peak: estimate %d B, measured %d B (%+.2f%%)", p.Name, p.Bytes, meas, 100*e)
				}
			}
		})
	}
}

// TestLadderReport prints the ladder table of docs/estimate.md:
// go test ./internal/estimate -run LadderReport -report -v
func TestLadderReport(t *testing.T) {
	dev, _ := GPU("h100-80gb")
	var b strings.Builder
	b.WriteString("| row | setup | measured peak | estimate | error | worst phase | measured reserved | estimate | error |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, row := range readLadders(t) {
		m, s, err := row.modelAndSetup()
		if err != nil {
			t.Fatal(err)
		}
		r, err := Estimate(m, s, dev)
		if err != nil {
			t.Fatalf("%s: %v", row.Row, err)
		}
		mm := row.Measured
		worst, wname := 0.0, "-"
		for _, p := range r.Top().Phases {
			meas, ok := mm.PhasePeaks[strings.TrimSuffix(p.Name.String(), "_step")]
			if !ok {
				continue
			}
			if p.Name == Backward {
				meas += mm.LogitsBytes
			}
			if e := float64(p.Bytes)/float64(meas) - 1; math.Abs(e) >= math.Abs(worst) {
				worst, wname = e, p.Name.String()
			}
		}
		ws := "-"
		if wname != "-" {
			ws = fmt.Sprintf("%s %+.1f%%", wname, 100*worst)
		}
		st := row.Setup
		setup := fmt.Sprintf("%s %s, %d x %d", st.Precision, st.Mode, st.MicroBatch, st.Seq)
		if st.Attn == "eager" {
			setup += ", eager"
		}
		if st.GradCkpt {
			setup += ", checkpointing"
		}
		if st.Compile {
			setup += ", compile"
		}
		if st.Dist != "" {
			setup += fmt.Sprintf(", %s rank of %d", st.Dist, st.World)
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %+.2f%% | %s | %d | %d | %+.1f%% |\n", row.Row, setup, mm.MaxAllocated, r.PeakAllocatedBytes,
			100*(float64(r.PeakAllocatedBytes)/float64(mm.MaxAllocated)-1), ws, mm.MaxReserved, r.PeakReservedBytes,
			100*(float64(r.PeakReservedBytes)/float64(mm.MaxReserved)-1))
	}
	if *printReport {
		fmt.Print(b.String())
	}
}
