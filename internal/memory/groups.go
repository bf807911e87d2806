package memory

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/ptscope/ptscope/internal/snapshot"
)

// Rule puts allocations whose stack matches Pattern into keyword group Name.
type Rule struct {
	Name    string
	Pattern *regexp.Regexp
}

// DefaultRules are the keyword groups users name, matched case-insensitively
// against "file:function" of each frame, innermost first.
var defaultRuleText = `# group: regular expression over "path/file.py:function" of each frame (innermost first)
optimizer: torch/optim/|optimizer|adam|_multi_tensor_|_fused_
communication: nccl|c10d|all_reduce|allreduce|all_gather|allgather|reduce_scatter|broadcast|all_to_all|distributed_c10d
fsdp: fsdp|fully_shard|flat_param|_fsdp_
moe: moe|expert|router|:gate|topk_gating
loss/logits: loss|cross_entropy|nll_loss|log_softmax|logits|lm_head
attention: attn|attention|sdpa|scaled_dot_product|flash|rotary|rope|kv_cache|cache_utils
mlp: mlp|feed_forward|feedforward|ffn|c_fc|fc1|fc2|gelu|swiglu|silu|activations\.py
norm: norm|layer_norm|rms_norm
embedding: embed|wte|wpe|sparse\.py
dropout: dropout
`

// ParseRules reads rules: one "name: regexp" per line, '#' comments.
func ParseRules(r io.Reader) ([]Rule, error) {
	var out []Rule
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		t := strings.TrimSpace(sc.Text())
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		name, pat, ok := strings.Cut(t, ":")
		if !ok || strings.TrimSpace(name) == "" {
			return nil, fmt.Errorf("rules line %d: expected \"group: regexp\"", line)
		}
		re, err := regexp.Compile("(?i)" + strings.TrimSpace(pat))
		if err != nil {
			return nil, fmt.Errorf("rules line %d: %v", line, err)
		}
		out = append(out, Rule{Name: strings.TrimSpace(name), Pattern: re})
	}
	return out, sc.Err()
}

// DefaultRules returns the built-in keyword groups.
func DefaultRules() []Rule {
	r, err := ParseRules(strings.NewReader(defaultRuleText))
	if err != nil {
		panic(err) // the built-in text is tested
	}
	return r
}

// DefaultRulesText is the built-in rules file, a starting point for users.
func DefaultRulesText() string { return defaultRuleText }

// groupOf returns the keyword group of a stack: the first rule matching the
// innermost frame that any rule matches; "other" if none does.
func groupOf(s *snapshot.Snapshot, id snapshot.StackID, rules []Rule, meta string) string {
	if meta != "" {
		for _, r := range rules {
			if r.Pattern.MatchString(meta) {
				return r.Name
			}
		}
	}
	for _, fid := range s.Stacks[id] {
		f := &s.Frames[fid]
		if isNoise(f) {
			continue
		}
		key := f.Filename + ":" + f.Name
		for _, r := range rules {
			if r.Pattern.MatchString(key) {
				return r.Name
			}
		}
	}
	return "other"
}
