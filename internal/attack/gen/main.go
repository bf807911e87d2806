// Command gen writes the inputs of the attack suite to files, to try them
// by hand (with /usr/bin/time -v, say):
//
//	go run ./internal/attack/gen -list
//	go run ./internal/attack/gen -o /tmp/attack [NAME...]
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ptscope/ptscope/internal/attack"
)

func main() {
	list := flag.Bool("list", false, "list the cases: name, command, expected exit code and text")
	out := flag.String("o", ".", "folder to write the inputs to (one sub-folder per class)")
	flag.Parse()
	if *list {
		for _, c := range attack.Cases() {
			fmt.Printf("%-32s %-8s exit %d  %q\n", c.Name, c.Command, c.Exit, c.Want)
		}
		return
	}
	want := map[string]bool{}
	for _, a := range flag.Args() {
		want[a] = true
	}
	for _, c := range attack.Cases() {
		if len(want) > 0 && !want[c.Name] {
			continue
		}
		p := filepath.Join(*out, strings.ReplaceAll(c.Name, "/", "_")+"_"+c.File)
		if err := os.WriteFile(p, c.Make(), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "gen:", err)
			os.Exit(1)
		}
		fmt.Printf("ptscope %s %s\n", c.Command, p)
	}
}
