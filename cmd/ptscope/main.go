// Command ptscope explains where GPU memory and time go in PyTorch training.
package main

import (
	"fmt"
	"os"

	"github.com/ptscope/ptscope/internal/capture"
	"github.com/ptscope/ptscope/internal/cli"
	"github.com/ptscope/ptscope/internal/web"
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
	return cli.Options{NewServer: newServer}.MainStatus(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
}

// newServer is serve's HTTP server (internal/web), handed to the CLI so
// that the CLI compiles without net/http: in an empty-cache build, net/http
// and the CLI's packages then compile side by side, and only web and this
// package wait for net/http.
func newServer(c cli.ServeConfig) (cli.Server, error) {
	s, err := web.New(web.Options{Roots: c.Roots, Rescan: c.Rescan, Log: c.Log, AfterRead: c.AfterRead, Source: c.Source, AllowHosts: c.AllowHosts})
	if err != nil {
		return nil, err
	}
	return s, nil
}
