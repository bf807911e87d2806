// Command shoot opens a page of ptscope in headless Chromium, waits for its
// views, runs page steps and takes a screenshot (scripts/screenshots.sh
// makes the README's pictures with it):
//
//	go run ./cmd/shoot -url http://127.0.0.1:8080/ -w 1280 -h 800 -wait memory-timeline \
//	    -do 'window.__ptscope.memory.goToPeak()' -do @click-block -out mem.png
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/ptscope/ptscope/browsertests"
)

type list []string

func (l *list) String() string     { return strings.Join(*l, ";") }
func (l *list) Set(s string) error { *l = append(*l, s); return nil }

func main() {
	u := flag.String("url", "", "page `URL` (http:// or file://)")
	w := flag.Int("w", 1280, "window width in CSS pixels")
	h := flag.Int("h", 800, "window height in CSS pixels")
	out := flag.String("out", "", "write a PNG of the viewport here")
	var wait, do, print list
	flag.Var(&wait, "wait", "wait until the element with this data-testid is ready (repeatable)")
	flag.Var(&do, "do", "evaluate this JavaScript (awaited) before the screenshot, in order (repeatable); @click-block clicks the middle of the memory timeline and waits for the block panel")
	flag.Var(&print, "print", "print this JavaScript's value as JSON (repeatable)")
	clickBlock := flag.Bool("click-block", false, "click the largest drawn block of the memory timeline near its middle")
	settle := flag.Duration("settle", 300*time.Millisecond, "wait this long before the screenshot")
	flag.Parse()
	if err := run(*u, *w, *h, *out, wait, do, print, *clickBlock, *settle); err != nil {
		fmt.Fprintln(os.Stderr, "shoot:", err)
		os.Exit(1)
	}
}

func run(u string, w, h int, out string, wait, do, print []string, clickBlock bool, settle time.Duration) error {
	b, err := browsertests.NewBrowser(w, h)
	if err != nil {
		return err
	}
	defer b.Close()
	if err := b.Open(u); err != nil {
		return err
	}
	for _, id := range wait {
		if err := b.Ready(id, time.Minute); err != nil {
			return err
		}
	}
	for _, js := range do {
		if js == "@click-block" {
			if err := browsertests.ClickMiddleBlock(b); err != nil {
				return err
			}
			continue
		}
		if _, err := browsertests.Eval[any](b, js); err != nil {
			return fmt.Errorf("%s: %v", js, err)
		}
		time.Sleep(100 * time.Millisecond)
		for _, id := range wait {
			if err := b.Ready(id, time.Minute); err != nil {
				return err
			}
		}
	}
	if clickBlock {
		if err := browsertests.ClickMiddleBlock(b); err != nil {
			return err
		}
	}
	for _, js := range print {
		v, err := browsertests.Eval[any](b, js)
		if err != nil {
			return fmt.Errorf("%s: %v", js, err)
		}
		j, _ := json.Marshal(v)
		fmt.Println(string(j))
	}
	if errs := b.Errors(); len(errs) > 0 {
		fmt.Fprintln(os.Stderr, "page errors:", strings.Join(errs, "; "))
	}
	time.Sleep(settle)
	if out != "" {
		return b.Screenshot(out)
	}
	return nil
}
