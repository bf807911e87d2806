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
	"io"
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
}

// normalize fills defaults and checks the model; it returns a copy.
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
	switch {
	case m.Layers <= 0, m.Hidden <= 0, m.Heads <= 0, m.FFN <= 0, m.Vocab <= 0:
		return m, fmt.Errorf("model %q: layers, hidden, heads, ffn and vocab must be positive", m.Name)
	case m.HeadDim == 0 && m.Hidden%m.Heads != 0:
		return m, fmt.Errorf("model %q: hidden %d is not divisible by heads %d", m.Name, m.Hidden, m.Heads)
	case m.KVHeads <= 0 || m.Heads%m.KVHeads != 0:
		return m, fmt.Errorf("model %q: heads %d must be a multiple of kv heads %d", m.Name, m.Heads, m.KVHeads)
	case m.MLP != "gelu" && m.MLP != "swiglu":
		return m, fmt.Errorf("model %q: mlp %q (want gelu or swiglu)", m.Name, m.MLP)
	case m.Norm != "layernorm" && m.Norm != "rmsnorm":
		return m, fmt.Errorf("model %q: norm %q (want layernorm or rmsnorm)", m.Name, m.Norm)
	case m.PositionEmbedding != "learned" && m.PositionEmbedding != "rope" && m.PositionEmbedding != "none":
		return m, fmt.Errorf("model %q: position embedding %q (want learned, rope or none)", m.Name, m.PositionEmbedding)
	case m.Experts < 0 || m.TopK < 0 || (m.Experts > 0 && m.TopK > m.Experts):
		return m, fmt.Errorf("model %q: top-k %d must be at most experts %d", m.Name, m.TopK, m.Experts)
	case m.Dropout < 0 || m.Dropout >= 1:
		return m, fmt.Errorf("model %q: dropout %g out of [0,1)", m.Name, m.Dropout)
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
	lin := func(n string, in, out int64, expert bool) {
		ts = append(ts, tensor{name: n + ".weight", numel: in * out, rows: out, cols: in, tpSplit: true, matmul: true, expert: expert, expertIdx: idx})
		if m.Bias {
			ts = append(ts, tensor{name: n + ".bias", numel: out, tpSplit: true, matmul: true, expert: expert, expertIdx: idx})
		}
	}
	norm("norm1")
	if q == k { // fused QKV as GPT-2 and the example LM build it
		lin("attn.qkv", h, 3*q, false)
	} else {
		lin("attn.q", h, q, false)
		lin("attn.kv", h, 2*k, false)
	}
	lin("attn.proj", q, h, false)
	norm("norm2")
	mlp := func(prefix string, f int64, expert bool) {
		if m.MLP == "swiglu" {
			lin(prefix+".gate_up", h, 2*f, expert)
		} else {
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
	ts := []tensor{{name: "wte", numel: int64(m.Vocab) * int64(m.Hidden), tpSplit: true, matmul: m.TiedEmbeddings}}
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
		ts = append(ts, tensor{name: "lm_head", numel: int64(m.Vocab) * h, tpSplit: true, matmul: true})
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

// hfConfig holds the config.json keys of the Hugging Face architectures we read
// (GPT-2, Llama, Mistral/Mixtral, Qwen2, GPT-NeoX, OPT-like names).
type hfConfig struct {
	ModelType        string   `json:"model_type"`
	NLayer           *int     `json:"n_layer"`
	NumHiddenLayers  *int     `json:"num_hidden_layers"`
	NEmbd            *int     `json:"n_embd"`
	HiddenSize       *int     `json:"hidden_size"`
	NHead            *int     `json:"n_head"`
	NumAttentionHead *int     `json:"num_attention_heads"`
	NumKVHeads       *int     `json:"num_key_value_heads"`
	HeadDim          *int     `json:"head_dim"`
	NInner           *int     `json:"n_inner"`
	Intermediate     *int     `json:"intermediate_size"`
	FFNDim           *int     `json:"ffn_dim"`
	VocabSize        *int     `json:"vocab_size"`
	NPositions       *int     `json:"n_positions"`
	MaxPositions     *int     `json:"max_position_embeddings"`
	HiddenAct        string   `json:"hidden_act"`
	ActivationFn     string   `json:"activation_function"`
	TieWordEmb       *bool    `json:"tie_word_embeddings"`
	NumLocalExperts  *int     `json:"num_local_experts"`
	NumExperts       *int     `json:"num_experts"`
	ExpertsPerTok    *int     `json:"num_experts_per_tok"`
	MoEIntermediate  *int     `json:"moe_intermediate_size"`
	RMSNormEps       *float64 `json:"rms_norm_eps"`
	AttentionBias    *bool    `json:"attention_bias"`
	ResidDropout     *float64 `json:"resid_pdrop"`
	UseCache         *bool    `json:"use_cache"`
}

func firstInt(ps ...*int) int {
	for _, p := range ps {
		if p != nil {
			return *p
		}
	}
	return 0
}

// ReadHFConfig reads a Hugging Face config.json into a Model.
func ReadHFConfig(r io.Reader, name string) (Model, error) {
	var c hfConfig
	if err := json.NewDecoder(r).Decode(&c); err != nil {
		return Model{}, fmt.Errorf("%s: not a JSON config: %w", name, err)
	}
	m := Model{Name: name, LossUpcast: true}
	m.Layers = firstInt(c.NLayer, c.NumHiddenLayers)
	m.Hidden = firstInt(c.NEmbd, c.HiddenSize)
	m.Heads = firstInt(c.NHead, c.NumAttentionHead)
	m.KVHeads = firstInt(c.NumKVHeads)
	m.HeadDim = firstInt(c.HeadDim)
	m.Vocab = firstInt(c.VocabSize)
	m.SeqMax = firstInt(c.NPositions, c.MaxPositions)
	act := strings.ToLower(c.HiddenAct + c.ActivationFn)
	gpt2Like := c.ModelType == "gpt2" || c.NEmbd != nil
	if gpt2Like {
		m.MLP, m.Norm, m.Bias, m.PositionEmbedding = "gelu", "layernorm", true, "learned"
		m.TiedEmbeddings = true
		m.FFN = firstInt(c.NInner)
		if m.FFN == 0 {
			m.FFN = 4 * m.Hidden
		}
		if act == "gelu_new" || act == "" {
			m.Activation = "gelu_tanh_python"
		}
		m.Dropout = 0.1
		if c.ResidDropout != nil {
			m.Dropout = *c.ResidDropout
		}
		m.HFUseCache = c.UseCache == nil || *c.UseCache
	} else {
		m.FFN = firstInt(c.Intermediate, c.FFNDim)
		m.Norm, m.PositionEmbedding = "layernorm", "rope"
		if c.RMSNormEps != nil {
			m.Norm = "rmsnorm"
		}
		m.MLP = "gelu"
		if strings.Contains(act, "silu") || strings.Contains(act, "swish") {
			m.MLP = "swiglu"
		}
		m.Bias = c.AttentionBias != nil && *c.AttentionBias
		m.TiedEmbeddings = c.TieWordEmb != nil && *c.TieWordEmb
		m.HFUseCache = c.UseCache == nil || *c.UseCache
	}
	if c.TieWordEmb != nil {
		m.TiedEmbeddings = *c.TieWordEmb
	}
	m.Experts = firstInt(c.NumLocalExperts, c.NumExperts)
	m.TopK = firstInt(c.ExpertsPerTok)
	m.MoEFFN = firstInt(c.MoEIntermediate)
	nm, err := m.normalize()
	if err != nil {
		return Model{}, fmt.Errorf("%s: %w", name, err)
	}
	return nm, nil
}
