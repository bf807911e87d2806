package estimate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// hfConfig holds the config.json keys of the Hugging Face decoder-only
// architectures we read (GPT-2, Llama, Mistral/Mixtral, Qwen2/3, Gemma,
// Phi-3, GPT-NeoX, OPT and friends). Multimodal configs keep the language
// model's keys under text_config.
type hfConfig struct {
	ModelType        string    `json:"model_type"`
	NLayer           *int      `json:"n_layer"`
	NumHiddenLayers  *int      `json:"num_hidden_layers"`
	NumLayers        *int      `json:"num_layers"`
	NEmbd            *int      `json:"n_embd"`
	HiddenSize       *int      `json:"hidden_size"`
	DModel           *int      `json:"d_model"`
	NHead            *int      `json:"n_head"`
	NumAttentionHead *int      `json:"num_attention_heads"`
	NumKVHeads       *int      `json:"num_key_value_heads"`
	HeadDim          *int      `json:"head_dim"`
	NInner           *int      `json:"n_inner"`
	Intermediate     *int      `json:"intermediate_size"`
	FFNDim           *int      `json:"ffn_dim"`
	VocabSize        *int      `json:"vocab_size"`
	NPositions       *int      `json:"n_positions"`
	MaxPositions     *int      `json:"max_position_embeddings"`
	HiddenAct        string    `json:"hidden_act"`
	ActivationFn     string    `json:"activation_function"`
	TieWordEmb       *bool     `json:"tie_word_embeddings"`
	NumLocalExperts  *int      `json:"num_local_experts"`
	NumExperts       *int      `json:"num_experts"`
	NRoutedExperts   *int      `json:"n_routed_experts"`
	ExpertsPerTok    *int      `json:"num_experts_per_tok"`
	MoEIntermediate  *int      `json:"moe_intermediate_size"`
	RMSNormEps       *float64  `json:"rms_norm_eps"`
	AttentionBias    *bool     `json:"attention_bias"`
	ResidDropout     *float64  `json:"resid_pdrop"`
	UseCache         *bool     `json:"use_cache"`
	TextConfig       *hfConfig `json:"text_config"`
}

// Model types whose MLP is gated (gate, up and down projections: SwiGLU,
// GeGLU) and those whose MLP is two plain projections.
var (
	gatedMLP = map[string]bool{"llama": true, "mistral": true, "mixtral": true, "qwen2": true, "qwen2_moe": true,
		"qwen3": true, "qwen3_moe": true, "gemma": true, "gemma2": true, "gemma3_text": true, "phi3": true,
		"olmo": true, "olmo2": true, "granite": true, "cohere": true, "internlm2": true, "deepseek_v2": true,
		"deepseek_v3": true, "smollm3": true, "ministral": true}
	plainMLP = map[string]bool{"gpt2": true, "gpt_neox": true, "opt": true, "gpt_bigcode": true, "starcoder2": true,
		"phi": true, "falcon": true, "gptj": true, "bloom": true}
	// model types whose attention has one fused query_key_value projection
	fusedQKV = map[string]bool{"gpt_neox": true, "falcon": true, "bloom": true, "gpt_bigcode": true}
)

// ReadHFConfig reads a Hugging Face config.json into a Model. Errors are one
// line naming the file, and the key or byte offset where the file is wrong.
func ReadHFConfig(r io.Reader, name string) (Model, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return Model{}, fmt.Errorf("%s: %w", name, err)
	}
	var c hfConfig
	if err := decodeConfig(data, &c); err != nil {
		return Model{}, fmt.Errorf("%s: %w", name, err)
	}
	if c.TextConfig != nil && firstInt(c.NLayer, c.NumHiddenLayers, c.NumLayers) == 0 {
		mt := c.ModelType
		c = *c.TextConfig
		if c.ModelType == "" {
			c.ModelType = mt
		}
	}
	m, err := c.model(name)
	if err != nil {
		return Model{}, fmt.Errorf("%s: %w", name, err)
	}
	nm, err := m.normalize()
	if err != nil {
		return Model{}, fmt.Errorf("%s: %s", name, strings.TrimPrefix(err.Error(), fmt.Sprintf("model %q: ", name)))
	}
	return nm, nil
}

// decodeConfig decodes one JSON object, turning the decoder's errors into
// what is wrong where.
func decodeConfig(data []byte, c *hfConfig) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return errors.New("empty file, want a JSON object (a Hugging Face config.json)")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	err := dec.Decode(c)
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Errorf("invalid JSON at byte offset %d: %v", se.Offset, se)
	case errors.As(err, &te) && te.Field == "":
		return fmt.Errorf("want a JSON object (a Hugging Face config.json), got %s", te.Value)
	case errors.As(err, &te):
		return fmt.Errorf("%s: want %s, got %s (byte offset %d)", te.Field, jsonKind(te.Type.String()), te.Value, te.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("truncated JSON at byte offset %d", len(data))
	case err != nil:
		return fmt.Errorf("invalid JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("unexpected data after the JSON object at byte offset %d", dec.InputOffset())
	}
	return nil
}

// jsonKind names a Go field type as the JSON value it wants.
func jsonKind(goType string) string {
	switch strings.TrimPrefix(goType, "*") {
	case "int":
		return "an integer"
	case "float64":
		return "a number"
	case "bool":
		return "true or false"
	case "string":
		return "a string"
	case "estimate.hfConfig":
		return "an object"
	}
	return goType
}

func firstInt(ps ...*int) int {
	for _, p := range ps {
		if p != nil {
			return *p
		}
	}
	return 0
}

// intKey is the first of several alternative keys present in a config.
type intKey struct {
	names []string
	ptrs  []*int
}

func (k intKey) get() (int, string, bool) {
	for i, p := range k.ptrs {
		if p != nil {
			return *p, k.names[i], true
		}
	}
	return 0, strings.Join(k.names, " or "), false
}

// model maps the config's keys to a Model, checking each key it needs.
func (c hfConfig) model(name string) (Model, error) {
	m := Model{Name: name, LossUpcast: true}
	need := []struct {
		dst  *int
		key  intKey
		max  int
		must bool
	}{
		{&m.Layers, intKey{[]string{"num_hidden_layers", "n_layer", "num_layers"}, []*int{c.NumHiddenLayers, c.NLayer, c.NumLayers}}, maxLayers, true},
		{&m.Hidden, intKey{[]string{"hidden_size", "n_embd", "d_model"}, []*int{c.HiddenSize, c.NEmbd, c.DModel}}, maxHidden, true},
		{&m.Heads, intKey{[]string{"num_attention_heads", "n_head"}, []*int{c.NumAttentionHead, c.NHead}}, maxHidden, true},
		{&m.Vocab, intKey{[]string{"vocab_size"}, []*int{c.VocabSize}}, maxVocab, true},
		{&m.KVHeads, intKey{[]string{"num_key_value_heads"}, []*int{c.NumKVHeads}}, maxHidden, false},
		{&m.HeadDim, intKey{[]string{"head_dim"}, []*int{c.HeadDim}}, maxHidden, false},
		{&m.FFN, intKey{[]string{"intermediate_size", "n_inner", "ffn_dim"}, []*int{c.Intermediate, c.NInner, c.FFNDim}}, maxFFN, false},
		{&m.SeqMax, intKey{[]string{"max_position_embeddings", "n_positions"}, []*int{c.MaxPositions, c.NPositions}}, 1 << 40, false},
		{&m.Experts, intKey{[]string{"num_local_experts", "num_experts", "n_routed_experts"}, []*int{c.NumLocalExperts, c.NumExperts, c.NRoutedExperts}}, maxExperts, false},
		{&m.TopK, intKey{[]string{"num_experts_per_tok"}, []*int{c.ExpertsPerTok}}, maxExperts, false},
		{&m.MoEFFN, intKey{[]string{"moe_intermediate_size"}, []*int{c.MoEIntermediate}}, maxFFN, false},
	}
	for _, n := range need {
		v, key, ok := n.key.get()
		switch {
		case !ok && n.must:
			return m, fmt.Errorf("no %s: not a decoder-only Transformer config this reader knows", key)
		case !ok:
			continue
		case n.must && v < 1, v < 0:
			return m, fmt.Errorf("%s %d: must be at least 1", key, v)
		case v > n.max:
			return m, fmt.Errorf("%s %d: larger than any model (at most %d)", key, v, n.max)
		}
		*n.dst = v
	}
	m.SeqMax = min(m.SeqMax, maxSeq)
	act := strings.ToLower(c.HiddenAct + c.ActivationFn)
	gpt2Like := c.ModelType == "gpt2" || (c.ModelType == "" && c.NEmbd != nil)
	m.HFUseCache = c.UseCache == nil || *c.UseCache
	if gpt2Like {
		m.MLP, m.Norm, m.Bias, m.PositionEmbedding = "gelu", "layernorm", true, "learned"
		m.TiedEmbeddings = true
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
	} else {
		if m.FFN == 0 {
			return m, errors.New("no intermediate_size (or ffn_dim, n_inner): the MLP size is unknown")
		}
		m.Norm, m.PositionEmbedding = "layernorm", "rope"
		if c.RMSNormEps != nil {
			m.Norm = "rmsnorm"
		}
		m.MLP = "gelu"
		if gatedMLP[c.ModelType] || (!plainMLP[c.ModelType] && (strings.Contains(act, "silu") || strings.Contains(act, "swish"))) {
			m.MLP = "swiglu"
		}
		if c.ModelType == "opt" {
			m.PositionEmbedding = "learned"
		}
		m.SplitLinear = !fusedQKV[c.ModelType]
		m.Bias = c.AttentionBias != nil && *c.AttentionBias
		m.QKVBias = c.ModelType == "qwen2" || c.ModelType == "qwen2_moe"
		m.QKNorm = c.ModelType == "qwen3" || c.ModelType == "qwen3_moe"
	}
	if c.TieWordEmb != nil {
		m.TiedEmbeddings = *c.TieWordEmb
	}
	if m.Experts == 0 {
		m.TopK, m.MoEFFN = 0, 0
	}
	return m, nil
}
