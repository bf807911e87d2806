// Command ptscope explains where GPU memory and time go in PyTorch training.
package main

import (
	"fmt"
	"os"

	"github.com/ptscope/ptscope/internal/capture"
	"github.com/ptscope/ptscope/internal/cli"
)

func main() {
	if code, ok := capture.WatchMain(); ok { // ptscope run's watch process
		os.Exit(code)
	}
	exitLike(run())
}

func run() cli.Status {
	// PTSCOPE_CPUPROFILE=FILE writes a CPU profile of the whole command in
	// a binary built with -tags cpuprofile (cpuprofile.go).
	stopProfile, err := startCPUProfile()
	if err != nil {
		fmt.Fprintf(os.Stderr, "ptscope: %v\n", err)
		return cli.Status{Code: cli.ExitUsage}
	}
	defer stopProfile()
	ctx, stop := cli.SignalContext() // Ctrl-C: exit 130 within a second
	defer stop()
	return cli.MainStatus(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
}
