package main

import (
	"os"

	"github.com/ptscope/ptscope/internal/cli"
)

// exitLike exits with the status's code (no signals to die of here).
func exitLike(st cli.Status) { os.Exit(st.Code) }
