// Command gensnapshot writes a realistic synthetic allocator snapshot pickle
// (see internal/snapshot/snapgen) for benchmarks and speed comparisons.
//
//	go run ./scripts/gensnapshot -entries 1000000 -o /tmp/snap_1m.pickle
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
	flag.Parse()
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
	if err := snapgen.Write(w, snapgen.Options{Entries: *entries, Seed: *seed}); err != nil {
		fmt.Fprintln(os.Stderr, "gensnapshot:", err)
		os.Exit(2)
	}
	if err := w.Flush(); err != nil || f.Close() != nil {
		fmt.Fprintln(os.Stderr, "gensnapshot: write failed")
		os.Exit(2)
	}
}
