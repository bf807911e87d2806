// Command ptscope explains where GPU memory and time go in PyTorch training.
package main

import (
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/ptscope/ptscope/internal/cli"
)

func main() { os.Exit(run()) }

func run() int {
	// PTSCOPE_CPUPROFILE=FILE writes a CPU profile of the whole command
	// (go tool pprof FILE), for performance work on real inputs.
	if p := os.Getenv("PTSCOPE_CPUPROFILE"); p != "" {
		f, err := os.Create(p)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "ptscope: PTSCOPE_CPUPROFILE: %v\n", err)
			return cli.ExitUsage
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	ctx, stop := cli.SignalContext() // Ctrl-C: exit 130 within a second
	defer stop()
	return cli.Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
}
