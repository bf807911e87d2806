// Command genfleet writes a folder of many ranks for measuring ptscope on a
// fleet (internal/fleet/fleetgen): DIR/rankN/snapshot.pickle, each the real
// snapshot SRC with its sizes and times scaled per rank, and with -traces a
// synthetic FSDP trace per rank. Never commit its output.
//
//	go run ./scripts/genfleet -src SNAPSHOT[.xz|.gz] -ranks 1000 -o DIR [-traces] [-special 13=leak.pickle.xz]
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ptscope/ptscope/internal/fleet/fleetgen"
	"github.com/ptscope/ptscope/internal/input"
)

type specials map[int]string

func (s specials) String() string { return fmt.Sprint(map[int]string(s)) }

func (s specials) Set(v string) error {
	r, path, ok := strings.Cut(v, "=")
	n, err := strconv.Atoi(r)
	if !ok || err != nil {
		return fmt.Errorf("want RANK=FILE, not %q", v)
	}
	s[n] = path
	return nil
}

func main() {
	src := flag.String("src", "", "snapshot pickle every rank gets, scaled (compressed or not); empty: no snapshots")
	ranks := flag.Int("ranks", 1000, "number of ranks")
	out := flag.String("o", "", "output folder (created)")
	traces := flag.Bool("traces", false, "also write a synthetic FSDP trace per rank")
	steps := flag.Int("steps", 4, "steps per trace")
	seed := flag.Uint64("seed", 1, "seed of the per-rank factors")
	sp := specials{}
	flag.Var(sp, "special", "`RANK=FILE`: that rank gets this snapshot as is (repeatable)")
	flag.Parse()
	if *out == "" || *ranks <= 0 {
		flag.Usage()
		os.Exit(2)
	}
	o := fleetgen.Options{Ranks: *ranks, Traces: *traces, TraceSteps: *steps, Seed: *seed, Special: map[int][]byte{}}
	var err error
	if *src != "" {
		if o.Snapshot, err = readAll(*src); err != nil {
			fail(err)
		}
	}
	for r, p := range sp {
		if o.Special[r], err = readAll(p); err != nil {
			fail(err)
		}
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fail(err)
	}
	t0 := time.Now()
	if _, err := fleetgen.Write(*out, o); err != nil {
		fail(err)
	}
	fmt.Fprintf(os.Stderr, "wrote %d ranks under %s in %.1f s\n", *ranks, *out, time.Since(t0).Seconds())
}

func readAll(path string) ([]byte, error) {
	r, err := input.NewSource(0, nil, nil).Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "genfleet:", err)
	os.Exit(1)
}
