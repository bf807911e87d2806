package memory

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/snapshot"
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
		{`(?i)lm_head|(^|\.)head(\.|$)`, []string{"lm_head", "\x00head"}},
		{`(?i)(^|\.)head`, nil},
		{`(?i)(^|\.)head(\.|$)x`, nil},
		{`(?i)a||b`, nil},
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
		"/home/ü/train.py:main", "x.py:emb", "model.head", "model.heads", "head.proj", "enc.layers.0.linear1", "enc.linear12",
		"x/head.py:f", "emb", "my.emb.x", "member.x", "Head"}
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

// stackOf adds a stack of frames ("file:function", innermost first) to s.
func stackOf(s *snapshot.Snapshot, frames ...[2]string) snapshot.StackID {
	var ids []snapshot.FrameID
	for _, f := range frames {
		s.Frames = append(s.Frames, snapshot.Frame{Filename: f[0], Name: f[1], Line: 1})
		ids = append(ids, snapshot.FrameID(len(s.Frames)-1))
	}
	s.Stacks = append(s.Stacks, ids)
	return snapshot.StackID(len(s.Stacks) - 1)
}

const sp = "/usr/lib/python3.12/site-packages/"

// Keyword groups come from the module path, then the allocating frames up
// to the innermost module forward (a frame of the user's code by its
// function only), then the tensor's module.
func TestKeywordGroups(t *testing.T) {
	s := &snapshot.Snapshot{Stacks: [][]snapshot.FrameID{{}}, Strings: []string{""}}
	rules := DefaultRules()
	cases := []struct {
		name       string
		stack      snapshot.StackID
		meta, role string
		want       string
	}{
		// FSDP2's loss input in a script named fsdp2.py: the user's frame
		// is matched by its function, not its file
		{"logits.float() in main", stackOf(s, [2]string{"/home/u/fsdp2.py", "main"}), "", "", "other"},
		{"cross_entropy in main", stackOf(s, [2]string{sp + "torch/nn/functional.py", "cross_entropy"},
			[2]string{"/home/u/fsdp2.py", "main"}), "", "", "loss/logits"},
		// HF Trainer: a Linear inside the MLP; compute_loss is further out
		{"a linear under compute_loss", stackOf(s, [2]string{sp + "torch/nn/modules/linear.py", "forward"},
			[2]string{sp + "transformers/models/llama/modeling_llama.py", "forward"},
			[2]string{sp + "transformers/trainer.py", "compute_loss"}, [2]string{"/home/u/train.py", "main"}),
			"model.layers.0.mlp.up_proj", "", "mlp"},
		{"same without a module path", stackOf(s, [2]string{sp + "torch/nn/modules/linear.py", "forward"},
			[2]string{sp + "transformers/trainer.py", "compute_loss"}), "", "", "other"},
		// FSDP2 renames the root's class FSDP<Class>: not the fsdp group
		{"FSDP2 root module", stackOf(s, [2]string{"/home/u/model.py", "forward"}), "FSDPTransformerLM", "", "other"},
		{"FSDP2 all-gather", stackOf(s, [2]string{sp + "torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py", "foreach_all_gather"}),
			"blocks.0", "", "communication"},
		{"GELU module", stackOf(s, [2]string{sp + "torch/nn/modules/activation.py", "forward"}), "blocks.0.mlp.act", "", "mlp"},
		// optimizer state: its frames before its parameter's module
		{"optimizer state", stackOf(s, [2]string{sp + "torch/optim/adam.py", "_init_group"}), "", "layers.0.mlp.fc1", "optimizer"},
		{"a gradient without frames", 0, "", "layers.0.attn.qkv", "attention"},
	}
	g := newGroupMatcher(s, rules, frameKinds(s))
	for _, c := range cases {
		if got := g.group(c.stack, c.meta, c.role); got != c.want {
			t.Errorf("%s: group %q, want %q", c.name, got, c.want)
		}
	}
}

func TestModuleGroupName(t *testing.T) {
	for in, want := range map[string]string{
		"model.layers.3.mlp.up_proj": "model.layers.*.mlp.up_proj",
		"blocks.10":                  "blocks.*",
		"enc.layers.0.linear1":       "enc.layers.*.linear1",
		"lm_head":                    "lm_head",
		"trainers/fsdp2.py":          "trainers/fsdp2.py",
		"<no stack recorded>":        "<no stack recorded>",
		"h0.attn":                    "h0.attn",
	} {
		if got := ModuleGroupName(in); got != want {
			t.Errorf("%s: %q, want %q", in, got, want)
		}
	}
}
