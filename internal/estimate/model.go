// Package estimate is an analytic model of the GPU memory one rank needs to train (or run) a
// decoder-only Transformer: parameters, gradients, optimizer state, activations per layer,
// temporaries, the caching allocator's rounding and memory outside the allocator. Model
// presets and GPU descriptions are data files embedded from presets/.
package estimate

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"math"
	"path"
	"sort"
	"strings"
)

//go:embed presets/models/*.json presets/gpus.json
var presetFS embed.FS

// Model describes a decoder-only Transformer's architecture and the implementation details that
// change what autograd saves.
type Model struct {
	Name              string  `json:"name"`
	Description       string  `json:"description,omitempty"`
	Layers            int     `json:"layers"`
	Hidden            int     `json:"hidden"`
	Heads             int     `json:"heads"`
	KVHeads           int     `json:"kv_heads,omitempty"` // 0: same as Heads
	HeadDim           int     `json:"head_dim,omitempty"` // 0: Hidden/Heads
	FFN               int     `json:"ffn"`
	Vocab             int     `json:"vocab"`
	SeqMax            int     `json:"seq_max"`
	MLP               string  `json:"mlp"`                  // gelu | swiglu
	Activation        string  `json:"activation,omitempty"` // gelu (one fused kernel) | gelu_tanh_python (HF gelu_new, 3 extra saved tensors)
	Norm              string  `json:"norm"`                 // layernorm | rmsnorm
	Bias              bool    `json:"bias"`
	TiedEmbeddings    bool    `json:"tied_embeddings"`
	PositionEmbedding string  `json:"position_embedding,omitempty"` // learned | rope
	Experts           int     `json:"experts,omitempty"`
	TopK              int     `json:"top_k,omitempty"`
	MoEFFN            int     `json:"moe_ffn,omitempty"` // expert FFN size; 0: FFN
	Dropout           float64 `json:"dropout,omitempty"`
	// HFUseCache: Hugging Face models return a KV cache (past_key_values) even in training
	// unless use_cache=False; it stays alive as long as the model output does.
	HFUseCache bool `json:"hf_use_cache,omitempty"`
	// LossUpcast: the loss is computed on logits.float() (Hugging Face ForCausalLMLoss).
	LossUpcast bool `json:"loss_upcast,omitempty"`
	// SplitLinear: q, k, v and gate, up are separate Linear modules (Hugging Face's
	// Llama family) rather than fused ones; each is its own allocator block.
	SplitLinear bool `json:"split_linear,omitempty"`
	// QKVBias: q, k and v projections have biases even when other linears do not (Qwen2).
	QKVBias bool `json:"qkv_bias,omitempty"`
	// QKNorm: Hugging Face's RMSNorm over each head of q and k before RoPE (Qwen3's q_norm
	// and k_norm); each keeps an fp32 copy of its input and its normalised output.
	QKNorm bool `json:"qk_norm,omitempty"`
	// HoldsFinalNormInput: the forward keeps the last layer's output alive while the output
	// projection runs, as the example LM does (F.linear(self.ln_f(x), ...)); Hugging Face's
	// models rebind it and free it.
	HoldsFinalNormInput bool `json:"holds_final_norm_input,omitempty"`
}

// Limits on model dimensions: beyond any published model, small enough
// that no byte count overflows.
const (
	maxLayers  = 1 << 14
	maxHidden  = 1 << 20
	maxFFN     = 1 << 24
	maxVocab   = 1 << 26
	maxExperts = 1 << 14
)

// normalize fills defaults and checks the model; it returns a copy. Errors
// name the field (as in the preset JSON).
func (m Model) normalize() (Model, error) {
	if m.KVHeads == 0 {
		m.KVHeads = m.Heads
	}
	if m.MLP == "" {
		m.MLP = "gelu"
	}
	if m.Activation == "" {
		if m.MLP == "swiglu" {
			m.Activation = "silu"
		} else {
			m.Activation = "gelu"
		}
	}
	if m.Norm == "" {
		m.Norm = "layernorm"
	}
	if m.PositionEmbedding == "" {
		m.PositionEmbedding = "learned"
	}
	if m.Experts > 0 && m.TopK == 0 {
		m.TopK = 2
	}
	if m.MoEFFN == 0 && m.Experts > 0 {
		m.MoEFFN = m.FFN
	}
	bad := func(field string, v int, format string, a ...any) error {
		return fmt.Errorf("model %q: %s %d: %s", m.Name, field, v, fmt.Sprintf(format, a...))
	}
	for _, c := range []struct {
		field string
		v     int
		lo    int
		hi    int
	}{{"layers", m.Layers, 1, maxLayers}, {"hidden", m.Hidden, 1, maxHidden}, {"heads", m.Heads, 1, maxHidden},
		{"kv_heads", m.KVHeads, 1, maxHidden}, {"head_dim", m.HeadDim, 0, maxHidden}, {"ffn", m.FFN, 1, maxFFN},
		{"vocab", m.Vocab, 1, maxVocab}, {"seq_max", m.SeqMax, 0, maxSeq}, {"experts", m.Experts, 0, maxExperts},
		{"top_k", m.TopK, 0, maxExperts}, {"moe_ffn", m.MoEFFN, 0, maxFFN}} {
		if c.v < c.lo || c.v > c.hi {
			return m, bad(c.field, c.v, "want %d..%d", c.lo, c.hi)
		}
	}
	switch {
	case m.HeadDim == 0 && m.Hidden%m.Heads != 0:
		return m, bad("hidden", m.Hidden, "not divisible by heads %d (give head_dim)", m.Heads)
	case m.Heads%m.KVHeads != 0:
		return m, bad("heads", m.Heads, "not a multiple of kv_heads %d", m.KVHeads)
	case m.MLP != "gelu" && m.MLP != "swiglu":
		return m, fmt.Errorf("model %q: mlp %q: want gelu or swiglu", m.Name, m.MLP)
	case m.Norm != "layernorm" && m.Norm != "rmsnorm":
		return m, fmt.Errorf("model %q: norm %q: want layernorm or rmsnorm", m.Name, m.Norm)
	case m.Activation != "gelu" && m.Activation != "gelu_tanh_python" && m.Activation != "silu":
		return m, fmt.Errorf("model %q: activation %q: want gelu, gelu_tanh_python or silu", m.Name, m.Activation)
	case m.PositionEmbedding != "learned" && m.PositionEmbedding != "rope" && m.PositionEmbedding != "none":
		return m, fmt.Errorf("model %q: position_embedding %q: want learned, rope or none", m.Name, m.PositionEmbedding)
	case m.Experts > 0 && m.TopK > m.Experts:
		return m, bad("top_k", m.TopK, "more than the %d experts", m.Experts)
	case m.Dropout < 0 || m.Dropout >= 1 || math.IsNaN(m.Dropout):
		return m, fmt.Errorf("model %q: dropout %g: want 0 <= dropout < 1", m.Name, m.Dropout)
	}
	if m.HeadDim == 0 {
		m.HeadDim = m.Hidden / m.Heads
	}
	if m.SeqMax == 0 {
		m.SeqMax = 2048
	}
	return m, nil
}

// tensor is one parameter tensor: its element count and whether tensor parallelism splits it.
type tensor struct {
	name      string
	numel     int64
	rows      int64 // 2-D tensors: output features (0 for vectors)
	cols      int64
	tpSplit   bool // column/row-parallel weight or vocab-parallel embedding
	vocab     bool // embedding or output projection: split only by the Megatron plan
	headGrad  bool // its gradient exists from the head's backward on (final norm, output projection, a tied embedding)
	matmul    bool // used in a matrix product (autocast makes a low-precision copy)
	expert    bool // belongs to an MoE expert (split by expert parallelism)
	expertIdx int
	ep        int64 // expert-parallel degree the tensor is split by (set per setup)
}

// layerTensors lists one Transformer layer's parameters.
func (m Model) layerTensors() []tensor {
	h, a, kv, hd := int64(m.Hidden), int64(m.Heads), int64(m.KVHeads), int64(m.HeadDim)
	q, k := a*hd, kv*hd
	var ts []tensor
	norm := func(n string) {
		ts = append(ts, tensor{name: n + ".weight", numel: h})
		if m.Norm == "layernorm" {
			ts = append(ts, tensor{name: n + ".bias", numel: h})
		}
	}
	idx := 0
	linB := func(n string, in, out int64, expert, bias bool) {
		ts = append(ts, tensor{name: n + ".weight", numel: in * out, rows: out, cols: in, tpSplit: true, matmul: true, expert: expert, expertIdx: idx})
		if bias {
			ts = append(ts, tensor{name: n + ".bias", numel: out, tpSplit: true, matmul: true, expert: expert, expertIdx: idx})
		}
	}
	lin := func(n string, in, out int64, expert bool) { linB(n, in, out, expert, m.Bias) }
	norm("norm1")
	if m.QKNorm {
		ts = append(ts, tensor{name: "attn.q_norm.weight", numel: hd}, tensor{name: "attn.k_norm.weight", numel: hd})
	}
	qb := m.Bias || m.QKVBias
	switch {
	case m.SplitLinear:
		linB("attn.q", h, q, false, qb)
		linB("attn.k", h, k, false, qb)
		linB("attn.v", h, k, false, qb)
	case q == k: // fused QKV as GPT-2 and the example LM build it
		linB("attn.qkv", h, 3*q, false, qb)
	default:
		linB("attn.q", h, q, false, qb)
		linB("attn.kv", h, 2*k, false, qb)
	}
	lin("attn.proj", q, h, false)
	norm("norm2")
	mlp := func(prefix string, f int64, expert bool) {
		switch {
		case m.MLP == "swiglu" && m.SplitLinear:
			lin(prefix+".gate", h, f, expert)
			lin(prefix+".up", h, f, expert)
		case m.MLP == "swiglu":
			lin(prefix+".gate_up", h, 2*f, expert)
		default:
			lin(prefix+".fc1", h, f, expert)
		}
		lin(prefix+".fc2", f, h, expert)
	}
	if m.Experts > 0 {
		ts = append(ts, tensor{name: "router.weight", numel: h * int64(m.Experts), matmul: true})
		for e := 0; e < m.Experts; e++ {
			idx = e
			mlp(fmt.Sprintf("experts.%d", e), int64(m.MoEFFN), true)
		}
	} else {
		mlp("mlp", int64(m.FFN), false)
	}
	return ts
}

// embeddingTensors lists the input embeddings (first pipeline stage).
func (m Model) embeddingTensors() []tensor {
	ts := []tensor{{name: "wte", numel: int64(m.Vocab) * int64(m.Hidden), tpSplit: true, vocab: true, matmul: m.TiedEmbeddings}}
	if m.PositionEmbedding == "learned" {
		ts = append(ts, tensor{name: "wpe", numel: int64(m.SeqMax) * int64(m.Hidden)})
	}
	return ts
}

// headTensors lists the final norm and an untied output projection (last pipeline stage).
func (m Model) headTensors() []tensor {
	h := int64(m.Hidden)
	ts := []tensor{{name: "norm_f.weight", numel: h}}
	if m.Norm == "layernorm" {
		ts = append(ts, tensor{name: "norm_f.bias", numel: h})
	}
	if !m.TiedEmbeddings {
		ts = append(ts, tensor{name: "lm_head", numel: int64(m.Vocab) * h, tpSplit: true, vocab: true, matmul: true})
	}
	return ts
}

func sumNumel(ts []tensor) int64 {
	var n int64
	for _, t := range ts {
		n += t.numel
	}
	return n
}

// Params is the total parameter count (tied embeddings counted once).
func (m Model) Params() int64 {
	return int64(m.Layers)*sumNumel(m.layerTensors()) + sumNumel(m.embeddingTensors()) + sumNumel(m.headTensors())
}

// ActiveParams is the parameter count one token passes through (MoE: top-k experts).
func (m Model) ActiveParams() int64 {
	if m.Experts == 0 {
		return m.Params()
	}
	var perLayer int64
	for _, t := range m.layerTensors() {
		if t.expert {
			perLayer += t.numel * int64(m.TopK) / int64(m.Experts)
		} else {
			perLayer += t.numel
		}
	}
	return int64(m.Layers)*perLayer + sumNumel(m.embeddingTensors()) + sumNumel(m.headTensors())
}

// PresetNames lists the embedded model presets.
func PresetNames() []string {
	ents, _ := presetFS.ReadDir("presets/models")
	var names []string
	for _, e := range ents {
		names = append(names, strings.TrimSuffix(e.Name(), ".json"))
	}
	sort.Strings(names)
	return names
}

// Preset returns an embedded model preset by name (case-insensitive).
func Preset(name string) (Model, error) {
	for _, n := range PresetNames() {
		if strings.EqualFold(n, name) {
			b, err := presetFS.ReadFile(path.Join("presets/models", n+".json"))
			if err != nil {
				return Model{}, err
			}
			var m Model
			dec := json.NewDecoder(bytes.NewReader(b))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&m); err != nil {
				return Model{}, fmt.Errorf("preset %s: %w", n, err)
			}
			return m.normalize()
		}
	}
	return Model{}, fmt.Errorf("unknown model preset %q (have %s)", name, strings.Join(PresetNames(), ", "))
}
