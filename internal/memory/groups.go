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

// groupMatcher names the keyword group of stacks: the first rule matching
// the module path (meta), else the first frame (innermost first, noise
// skipped) that a rule matches, by the first rule that matches it. Each
// frame is matched against the rules once, however many stacks share it:
// the rules are case-insensitive regexps, costly to run per stack frame.
type groupMatcher struct {
	s     *snapshot.Snapshot
	rules []Rule
	frame []int32 // per frame: 0 not matched yet, -1 no rule, else rule index + 1
	meta  map[string]string
	lits  [][]string // per rule: its words when it is a plain alternation (literalAlternation)
}

func newGroupMatcher(s *snapshot.Snapshot, rules []Rule) *groupMatcher {
	g := &groupMatcher{s: s, rules: rules, frame: make([]int32, len(s.Frames)), meta: map[string]string{},
		lits: make([][]string, len(rules))}
	for i, r := range rules {
		g.lits[i] = literalAlternation(r.Pattern.String())
	}
	return g
}

// literalAlternation returns the lower-case words of a case-insensitive
// pattern that is only ASCII words separated by '|' ("nccl|c10d|all_reduce",
// "activations\.py"), such as every default rule; nil for any other
// pattern. Such a rule matches an ASCII string exactly when the lower-cased
// string contains one of the words, which is much cheaper than running the
// case-folding regexp.
func literalAlternation(pat string) []string {
	pat, ok := strings.CutPrefix(pat, "(?i)")
	if !ok || pat == "" {
		return nil
	}
	var out []string
	var w []byte
	for i := 0; i <= len(pat); i++ {
		if i == len(pat) || pat[i] == '|' {
			if len(w) == 0 {
				return nil
			}
			out = append(out, strings.ToLower(string(w)))
			w = w[:0]
			continue
		}
		c := pat[i]
		switch {
		case c >= 0x80:
			return nil
		case c == '\\':
			// an escaped punctuation character is itself
			if i+1 == len(pat) || !strings.ContainsRune(`.-_/:`, rune(pat[i+1])) {
				return nil
			}
			i++
			w = append(w, pat[i])
		case strings.IndexByte(`()[]{}*+?^$.`, c) >= 0:
			return nil
		default:
			w = append(w, c)
		}
	}
	return out
}

// match returns the index of the first rule matching key, or -1.
func (g *groupMatcher) match(key string) int {
	lower, ascii := "", true
	for i := 0; i < len(key); i++ {
		if key[i] >= 0x80 {
			ascii = false
			break
		}
	}
	if ascii {
		lower = strings.ToLower(key)
	}
	for i, r := range g.rules {
		if ws := g.lits[i]; ws != nil && ascii {
			for _, w := range ws {
				if strings.Contains(lower, w) {
					return i
				}
			}
			continue
		}
		if r.Pattern.MatchString(key) {
			return i
		}
	}
	return -1
}

// group returns the keyword group of stack id with module path meta ("" for
// none).
func (g *groupMatcher) group(id snapshot.StackID, meta string) string {
	if meta != "" {
		name, ok := g.meta[meta]
		if !ok {
			if i := g.match(meta); i >= 0 {
				name = g.rules[i].Name
			}
			g.meta[meta] = name
		}
		if name != "" {
			return name
		}
	}
	for _, fid := range g.s.Stacks[id] {
		m := g.frame[fid]
		if m == 0 {
			m = -1
			if f := &g.s.Frames[fid]; !isNoise(f) {
				m = int32(g.match(f.Filename+":"+f.Name)) + 1
				if m == 0 {
					m = -1
				}
			}
			g.frame[fid] = m
		}
		if m > 0 {
			return g.rules[m-1].Name
		}
	}
	return "other"
}
