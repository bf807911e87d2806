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
// against the module path ptscope run recorded, then "path/file.py:function"
// of each allocating frame, innermost first.
var defaultRuleText = `# group: regular expression over the module path, then "path/file.py:function" of each frame (innermost first)
optimizer: torch/optim/|optimizer|adam|_multi_tensor_|_fused_
communication: nccl|c10d|all_reduce|allreduce|all_gather|allgather|reduce_scatter|broadcast|all_to_all|distributed_c10d
fsdp: fsdp|fully_shard|flat_param|_fsdp_
moe: moe|expert|router|:gate|topk_gating
loss/logits: loss|cross_entropy|nll_loss|log_softmax|logits|lm_head|(^|\.)head(\.|$)
attention: attn|attention|sdpa|scaled_dot_product|flash|rotary|rope|kv_cache|cache_utils
mlp: mlp|feed_forward|feedforward|ffn|c_fc|fc1|fc2|gelu|swiglu|silu|activations\.py|(^|\.)linear1(\.|$)|(^|\.)linear2(\.|$)
norm: norm|layer_norm|rms_norm
embedding: embed|wte|wpe|sparse\.py|(^|\.)emb(\.|$)
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

// NoStackGroup is the keyword group of an allocation with no frames and
// no module path: no rule can see what made it (allocated before the
// recording, on autograd's threads without Python frames, or in a step
// ptscope run recorded without stacks). Naming it apart keeps "other" to
// the allocations whose frames matched no rule: in the real GPT-2 fp32
// training fixture the stackless ones are 43% of the peak, and "other"
// held them with 20% more (63%).
const NoStackGroup = "<no stack recorded>"

// groupMatcher names the keyword group of allocations: the first rule
// matching its module path (meta, recorded by ptscope run while the
// module's forward or backward ran), else the innermost of its group frames
// that a rule matches, else the module of its tensor (role, from a bundle's
// inventories); NoStackGroup for an allocation without frames, else
// "other". Group frames are the allocating ones
// up to the innermost module forward: what called that forward (a
// trainer's compute_loss, a script named fsdp2.py) did not make the
// allocation. A frame of the user's own code is matched by its function
// name only, not its file. Each frame is matched against the rules once,
// however many stacks share it: the rules are case-insensitive regexps,
// costly to run per stack frame.
type groupMatcher struct {
	s     *snapshot.Snapshot
	rules []Rule
	kinds []FrameKind // per frame
	frame []int32     // per frame: 0 not matched yet, -1 no rule, else rule index + 1
	meta  map[string]string
	lits  [][]string // per rule: its words when it is a plain alternation (literalAlternation)
}

func newGroupMatcher(s *snapshot.Snapshot, rules []Rule, kinds []FrameKind) *groupMatcher {
	g := &groupMatcher{s: s, rules: rules, kinds: kinds, frame: make([]int32, len(s.Frames)), meta: map[string]string{},
		lits: make([][]string, len(rules))}
	for i, r := range rules {
		g.lits[i] = literalAlternation(r.Pattern.String())
	}
	return g
}

// literalAlternation returns the lower-case words of a case-insensitive
// pattern that is only ASCII words separated by '|' ("nccl|c10d|all_reduce",
// "activations\.py"), each word possibly a whole dotted component
// ("(^|\.)head(\.|$)": a module path's "head", not "heads"), such as every
// default rule; nil for any other pattern. A component word is returned
// with a leading componentMark. Such a rule matches an ASCII string exactly
// when the lower-cased string contains one of the words (as a component,
// for a component word), which is much cheaper than running the
// case-folding regexp.
func literalAlternation(pat string) []string {
	pat, ok := strings.CutPrefix(pat, "(?i)")
	if !ok || pat == "" {
		return nil
	}
	const compStart, compEnd = `(^|\.)`, `(\.|$)`
	var out []string
	for len(pat) > 0 {
		comp := strings.HasPrefix(pat, compStart)
		if comp {
			pat = pat[len(compStart):]
		}
		var w []byte
		for len(pat) > 0 && pat[0] != '|' && !(comp && strings.HasPrefix(pat, compEnd)) {
			c := pat[0]
			switch {
			case c >= 0x80:
				return nil
			case c == '\\':
				// an escaped punctuation character is itself
				if len(pat) == 1 || !strings.ContainsRune(`.-_/:`, rune(pat[1])) {
					return nil
				}
				pat = pat[1:]
				w = append(w, pat[0])
			case strings.IndexByte(`()[]{}*+?^$.`, c) >= 0:
				return nil
			default:
				w = append(w, c)
			}
			pat = pat[1:]
		}
		if comp {
			if !strings.HasPrefix(pat, compEnd) {
				return nil
			}
			pat = pat[len(compEnd):]
		}
		if len(w) == 0 || len(pat) > 0 && pat[0] != '|' || pat == "|" {
			return nil
		}
		pat = strings.TrimPrefix(pat, "|")
		word := strings.ToLower(string(w))
		if comp {
			word = componentMark + word
		}
		out = append(out, word)
	}
	return out
}

// componentMark starts a word of literalAlternation that matches only as a
// whole dotted component.
const componentMark = "\x00"

// containsWord reports whether lower holds word w of literalAlternation.
func containsWord(lower, w string) bool {
	c, comp := strings.CutPrefix(w, componentMark)
	if !comp {
		return strings.Contains(lower, w)
	}
	for i := 0; ; {
		k := strings.Index(lower[i:], c)
		if k < 0 {
			return false
		}
		k += i
		end := k + len(c)
		if (k == 0 || lower[k-1] == '.') && (end == len(lower) || lower[end] == '.') {
			return true
		}
		i = k + 1
	}
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
				if containsWord(lower, w) {
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

// group returns the keyword group of an allocation of stack id with module
// path meta and tensor module role ("" for none).
func (g *groupMatcher) group(id snapshot.StackID, meta, role string) string {
	if name := g.module(meta); name != "" {
		return name
	}
	for _, fid := range groupFrames(g.s, g.s.Stacks[id], g.kinds) {
		m := g.frame[fid]
		if m == 0 {
			m = -1
			if f := &g.s.Frames[fid]; !isNoise(f) {
				key := f.Filename + ":" + f.Name
				if g.kinds[fid] == FrameUser {
					key = ":" + f.Name
				}
				m = int32(g.match(key)) + 1
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
	if name := g.module(role); name != "" {
		return name
	}
	if len(g.s.Stacks[id]) == 0 {
		return NoStackGroup
	}
	return "other"
}

// module is the group of the first rule matching a module path, "" if none.
// A root module is named by its class, which FSDP2 renames FSDP<Class>:
// that prefix says nothing about what the module computes.
func (g *groupMatcher) module(path string) string {
	if path == "" {
		return ""
	}
	name, ok := g.meta[path]
	if !ok {
		p := path
		if rest, cut := strings.CutPrefix(p, "FSDP"); cut && rest != "" && rest[0] >= 'A' && rest[0] <= 'Z' && !strings.Contains(p, ".") {
			p = rest
		}
		if i := g.match(p); i >= 0 {
			name = g.rules[i].Name
		}
		g.meta[path] = name
	}
	return name
}

// groupFrames are a stack's allocating frames (allocating) up to and
// including the innermost module forward.
func groupFrames(s *snapshot.Snapshot, ids []snapshot.FrameID, kinds []FrameKind) []snapshot.FrameID {
	ids = allocating(ids, kinds)
	for i, f := range ids {
		if s.Frames[f].Name == "forward" {
			return ids[:i+1]
		}
	}
	return ids
}

// ModuleGroupName replaces the numbers of a module path with "*"
// ("model.layers.3.mlp" -> "model.layers.*.mlp").
func ModuleGroupName(p string) string {
	if !strings.ContainsAny(p, "0123456789") || strings.HasPrefix(p, "<") || strings.Contains(p, "/") {
		return p // no number, or not a module path (a source file, "<no stack recorded>")
	}
	parts := strings.Split(p, ".")
	for i, x := range parts {
		if x != "" && strings.Trim(x, "0123456789") == "" {
			parts[i] = "*"
		}
	}
	return strings.Join(parts, ".")
}

// moduleGroups merges module groups by ModuleGroupName, largest first.
func moduleGroups(mods []Group) []Group {
	by := map[string]*Group{}
	for _, m := range mods {
		k := ModuleGroupName(m.Name)
		g := by[k]
		if g == nil {
			g = &Group{Name: k}
			by[k] = g
		}
		g.Bytes += m.Bytes
		g.Count += m.Count
	}
	return sortedGroups(by)
}
