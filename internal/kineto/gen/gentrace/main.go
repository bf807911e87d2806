// Command gentrace writes a large Kineto trace for benchmarks by replicating
// the events of a real one, or a synthetic one from a named scenario (see
// package gen).
//
//	go run ./internal/kineto/gen/gentrace -src ../shared/fixtures/gpt2tiny_with_stack.pt.trace.json -size 360MB -o big.pt.trace.json
//	go run ./internal/kineto/gen/gentrace -src ... -steps 60 -o big.pt.trace.json
//	go run ./internal/kineto/gen/gentrace -src ... -size 10GB -sections -o big.pt.trace.json
//	go run ./internal/kineto/gen/gentrace -scenario fsdp -rank 1 -o rank1.pt.trace.json
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/kineto/gen"
	"github.com/ptscope/ptscope/internal/units"

	"io"
)

func main() {
	src := flag.String("src", "", "source trace (plain or compressed)")
	size := flag.String("size", "360MB", "approximate size of the output")
	steps := flag.Int("steps", 0, "write exactly this many copies (steps) instead of -size")
	sections := flag.Bool("sections", false, "Kineto's layout: every copy's host ops first, then Python functions, then runtime calls and GPU work")
	scenario := flag.String("scenario", "", "write a synthetic trace instead: fsdp, ddp1 or dataloader (see gen.Scenarios)")
	rank := flag.Int("rank", 0, "rank of the -scenario trace")
	out := flag.String("o", "", "output file")
	flag.Parse()
	if *scenario != "" && *out != "" {
		sc, ok := gen.Scenarios(*rank)[*scenario]
		if !ok {
			fmt.Fprintf(os.Stderr, "gentrace: unknown scenario %q\n", *scenario)
			os.Exit(2)
		}
		f, err := os.Create(*out)
		if err == nil {
			_, err = sc.Write(f)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "gentrace:", err)
			os.Exit(1)
		}
		return
	}
	if *src == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "usage: gentrace -src TRACE -size 360MB|-steps N -o OUT, or gentrace -scenario NAME [-rank R] -o OUT")
		os.Exit(2)
	}
	n, err := units.ParseBytes(*size)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gentrace:", err)
		os.Exit(2)
	}
	r, err := input.NewSource(0, nil, nil).Open(*src)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gentrace:", err)
		os.Exit(2)
	}
	data, err := io.ReadAll(r)
	r.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gentrace:", err)
		os.Exit(2)
	}
	f, err := os.Create(*out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gentrace:", err)
		os.Exit(2)
	}
	var st gen.Stats
	st, err = gen.GenerateWith(f, data, gen.Options{Target: n, Steps: *steps, Sections: *sections})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gentrace:", err)
		os.Exit(1)
	}
	fmt.Printf("%s: %d bytes, %d events, %d copies of %s\n", *out, st.Bytes, st.Events, st.Copies, *src)
}
