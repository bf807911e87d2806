// Command ptscope explains where GPU memory and time go in PyTorch training.
package main

import (
	"context"
	"os"
	"os/signal"

	"github.com/ptscope/ptscope/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := cli.Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
