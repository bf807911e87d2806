package memory

import (
	"fmt"
	"strings"
	"testing"
)

func TestLiteralAlternation(t *testing.T) {
	for _, c := range []struct {
		pat  string
		want []string
	}{
		{"(?i)nccl|C10D|all_reduce", []string{"nccl", "c10d", "all_reduce"}},
		{`(?i)mlp|activations\.py`, []string{"mlp", "activations.py"}},
		{"(?i):gate|topk_gating", []string{":gate", "topk_gating"}},
		{"(?i)a.b", nil},
		{"(?i)a|", nil},
		{"(?i)(a|b)", nil},
		{"nccl", nil},
		{`(?i)\d+`, nil},
		{"(?i)é", nil},
	} {
		if got := literalAlternation(c.pat); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%q: %q, want %q", c.pat, got, c.want)
		}
	}
}

// The words of a plain alternation match exactly where its regexp does.
func TestGroupMatchAgreesWithRegexp(t *testing.T) {
	rules := DefaultRules()
	extra, err := ParseRules(strings.NewReader("custom: Block\\.forward|my_layer\nre: l[0-9]+\\.attn\n"))
	if err != nil {
		t.Fatal(err)
	}
	rules = append(extra, rules...)
	g := &groupMatcher{rules: rules, lits: make([][]string, len(rules))}
	plain := 0
	for i, r := range rules {
		if g.lits[i] = literalAlternation(r.Pattern.String()); g.lits[i] != nil {
			plain++
		}
	}
	if plain != len(rules)-1 {
		t.Errorf("%d of %d rules are plain alternations", plain, len(rules))
	}
	keys := []string{"torch/optim/adamw.py:step", "/x/model.py:Block.forward", "/x/model.py:BLOCK.FORWARD", "a/l12.attn.py:f",
		"torch/distributed/distributed_c10d.py:all_reduce", "x/ACTIVATIONS.py:gelu", "x/activationsXpy:f", "x/y.py:Gate",
		"/home/ü/train.py:main", "x.py:emb"}
	for _, k := range keys {
		want := -1
		for i, r := range rules {
			if r.Pattern.MatchString(k) {
				want = i
				break
			}
		}
		if got := g.match(k); got != want {
			t.Errorf("%q: rule %d, the regexps say %d", k, got, want)
		}
	}
}
