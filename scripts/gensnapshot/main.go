// Command gensnapshot writes a realistic synthetic allocator snapshot pickle
// (see internal/snapshot/snapgen) for benchmarks and speed comparisons.
//
//	go run ./scripts/gensnapshot -entries 1000000 -o /tmp/snap_1m.pickle
//	go run ./scripts/gensnapshot -model gpt2s -o /tmp/gpt2s_1m.pickle   # GPT-2 small at batch 8 x 512
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"

	"github.com/ptscope/ptscope/internal/snapshot/snapgen"
)

func main() {
	entries := flag.Int("entries", 1_000_000, "trace entries")
	seed := flag.Uint64("seed", 1, "random seed")
	out := flag.String("o", "", "output file (required)")
	model := flag.String("model", "synthetic", "the training recorded: synthetic (random sizes up to 1 MiB) or gpt2s (GPT-2 small, batch 8 x 512)")
	flag.Parse()
	o := snapgen.Options{Entries: *entries, Seed: *seed}
	switch *model {
	case "synthetic":
	case "gpt2s":
		o.Model = snapgen.ModelGPT2Small
	default:
		fmt.Fprintf(os.Stderr, "gensnapshot: -model %q: want synthetic or gpt2s\n", *model)
		os.Exit(2)
	}
	if *out == "" {
		fmt.Fprintln(os.Stderr, "gensnapshot: -o FILE is required")
		os.Exit(2)
	}
	f, err := os.Create(*out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gensnapshot:", err)
		os.Exit(2)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	if err := snapgen.Write(w, o); err != nil {
		fmt.Fprintln(os.Stderr, "gensnapshot:", err)
		os.Exit(2)
	}
	if err := w.Flush(); err != nil || f.Close() != nil {
		fmt.Fprintln(os.Stderr, "gensnapshot: write failed")
		os.Exit(2)
	}
}
