//go:build ignore

// gen_glyphs writes the face files that font.go embeds (fontdata/*.bin)
// from the Liberation Sans TrueType files; see package glyphgen for what
// they hold. Run it with go generate in this folder.
package main

import (
	"log"
	"os"

	"github.com/ptscope/ptscope/internal/report/chart/internal/glyphgen"
)

func main() {
	for _, f := range glyphgen.Faces {
		b, err := glyphgen.Extract(f.TTF)
		if err != nil {
			log.Fatalf("%s: %v", f.File, err)
		}
		if err := os.WriteFile(f.File, b, 0o644); err != nil {
			log.Fatal(err)
		}
	}
}
