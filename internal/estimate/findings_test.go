package estimate

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// Every finding id the estimate raises is kebab-case, as every command's,
// and docs/json.md's estimate section lists it.
func TestFindingIDs(t *testing.T) {
	doc, err := os.ReadFile("../../docs/json.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(doc)
	section = section[strings.Index(section, "## ptscope estimate --json"):strings.Index(section, "### ptscope estimate --sweep")]
	kebab := regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	setups := []struct {
		model, gpu string
		mod        func(*Setup)
	}{
		{"llama3-70b", "h100-80gb", func(s *Setup) { s.DP, s.TP, s.Seq, s.MicroBatch = 4, 2, 4096, 2 }},
		{"llama3-8b", "h100-80gb", func(s *Setup) { s.Seq, s.MicroBatch = 1024, 8 }},
		{"llama3-8b", "4090", func(s *Setup) { s.DP, s.Zero, s.Offload, s.Seq = 8, 2, OffloadOptimizer, 2048 }},
		{"gpt2", "h100-80gb", func(s *Setup) { s.Attention, s.Seq = AttentionEager, 1024 }},
	}
	seen := map[string]bool{}
	for _, c := range setups {
		m, err := Preset(c.model)
		if err != nil {
			t.Fatal(err)
		}
		dev, err := GPU(c.gpu)
		if err != nil {
			t.Fatal(err)
		}
		s := DefaultSetup()
		c.mod(&s)
		r, err := Estimate(m, s, dev)
		if err != nil {
			t.Fatalf("%s: %v", c.model, err)
		}
		for _, f := range r.Findings {
			seen[f.ID] = true
		}
	}
	for _, id := range []string{"does-not-fit", "try-recompute", "try-sequence-parallel", "replicated-logits", "offload-host-memory", "eager-attention-scores"} {
		if !seen[id] {
			t.Errorf("no setup raised %s", id)
		}
	}
	for id := range seen {
		if !kebab.MatchString(id) {
			t.Errorf("finding id %q is not kebab-case", id)
		}
		if !strings.Contains(section, "`"+id+"`") {
			t.Errorf("finding id %q is not in docs/json.md's estimate section", id)
		}
	}
}
