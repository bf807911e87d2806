package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/ptscope/ptscope/internal/input"
)

const serveUsage = `Usage: ptscope serve [flags] FILE|DIR...

Serve interactive views of snapshots, profiler traces and ptscope run
bundles in the browser: the memory timeline (every allocation at least a
pixel wide and tall drawn on its own; click one for its stack), the
allocator state at any entry, breakdowns by category, source, module and
stack, the profiler views (overview, operators, kernels, trace timeline),
and two inputs of the same kind compared as ptscope diff compares them.
Folders are searched again every --rescan, so the files of a running
capture appear as they are written. No request leaves the machine.

The server binds 127.0.0.1 unless --addr names another address, which
also needs --allow-remote (anyone who can reach that address can read the
inputs). It answers requests whose Host is a loopback name or, with
--allow-remote, an IP address; name others with --allow-host (a page of
another site cannot reach it by DNS rebinding). The API answers the
server's own page only, a few views are computed at once, and none while
the server's memory is over --max-memory (docs/security.md). See
docs/serve.md for the views' URLs.

Examples:
  ptscope serve snapshot.pickle
  ptscope serve --addr 127.0.0.1:9000 --open runs/
  ptscope serve rank0.pickle rank0.pt.trace.json.gz
`

// ServeConfig is what serve gives its server: the inputs and the flags
// that shape the answers.
type ServeConfig struct {
	Roots []string // files and folders to serve (folders are rescanned)
	// Rescan is how often folders are searched for new files (0: never).
	Rescan time.Duration
	// Log receives one line per failed request and per scan error.
	Log io.Writer
	// AfterRead runs after each snapshot is decoded and before it is
	// analysed (serve collects the decoder's garbage there).
	AfterRead func()
	// Source finds and opens the inputs, within the server's memory
	// budget (--max-memory).
	Source *input.Source
	// AllowHosts are Host names answered besides loopback ones (and, when
	// not local, IP address literals): --allow-host.
	AllowHosts []string
}

// Server is serve's server, made by Options.NewServer once its inputs are
// found (internal/web's *Server).
type Server interface {
	// Start loads the inputs and rescans the folders until ctx ends.
	Start(ctx context.Context)
	// Loading reports whether an input is queued or being loaded.
	Loading() bool
	// Serve answers HTTP requests on ln until ctx ends (then nil); local:
	// ln is loopback only, and only loopback Host names are answered.
	Serve(ctx context.Context, ln net.Listener, local bool) error
}

func serveCommand() command {
	c := command{name: "serve", summary: "interactive memory and profiler views in the browser", usage: serveUsage}
	c.run = func(e *env, args []string) error {
		fs := newFlagSet(e, c)
		addr := fs.String("addr", "127.0.0.1:8080", "listen `ADDRESS` (host:port; port 0 picks a free one)")
		allowRemote := fs.Bool("allow-remote", false, "allow an --addr that is not loopback (the inputs become readable from the network)")
		open := fs.Bool("open", false, "open the page in the default browser")
		rescan := fs.Duration("rescan", 2*time.Second, "how often folders are searched for new files (0: never)")
		var allowHosts []string
		fs.Func("allow-host", "also answer requests whose Host is `NAME` (comma-separated; e.g. the machine's name with --allow-remote)", func(v string) error {
			for _, h := range strings.Split(v, ",") {
				if h = strings.TrimSpace(h); h != "" {
					allowHosts = append(allowHosts, h)
				}
			}
			return nil
		})
		addInputFlags(e, fs)
		paths, err := parseInterspersed(fs, args)
		if err != nil {
			return err
		}
		if len(paths) == 0 {
			return usagef("serve: no input (give snapshot or trace files, bundles or folders; see ptscope help serve)")
		}
		local := isLoopbackAddr(*addr)
		if !local && !*allowRemote {
			return usagef("serve: --addr %s is not a loopback address; add --allow-remote to serve it to the network", *addr)
		}
		if e.opts.NewServer == nil {
			return errors.New("serve: this build of ptscope has no web server (cli.Options.NewServer is not set)")
		}
		tuneGC()
		s, err := e.opts.NewServer(ServeConfig{Roots: paths, Rescan: *rescan, Log: e.stderr, AfterRead: runtime.GC, Source: e.serveSource(), AllowHosts: allowHosts})
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", *addr)
		if err != nil {
			return fmt.Errorf("serve: %v", err)
		}
		s.Start(e.ctx)
		go collectOnceLoaded(e, s)
		url := "http://" + ln.Addr().String() + "/"
		fmt.Fprintf(e.stderr, "ptscope serve: %s (Ctrl-C to stop)\n", url)
		if *open {
			openBrowser(url)
		}
		if err := s.Serve(e.ctx, ln, local); err != nil {
			return fmt.Errorf("serve: %v", err)
		}
		return nil
	}
	return c
}

// isLoopbackAddr reports whether a listen address binds loopback only.
func isLoopbackAddr(addr string) bool {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	return h == "localhost" || (net.ParseIP(h) != nil && net.ParseIP(h).IsLoopback())
}

// openBrowser opens url in the desktop's browser, if there is one.
func openBrowser(url string) {
	name := "xdg-open"
	switch runtime.GOOS {
	case "darwin":
		name = "open"
	case "windows":
		name = "explorer"
	}
	if cmd := exec.Command(name, url); cmd.Start() == nil {
		go cmd.Wait()
	}
}

// collectOnceLoaded sets the collector back to its default pace once the
// inputs are loaded (tuneGC's GOGC=400 speeds loading; under load the
// answers make garbage only, and at 400 the heap would grow to five times
// the models: 1.3 GB instead of 0.5 GB for a 1M-entry snapshot and a
// 350 MB trace under 50 clients).
func collectOnceLoaded(e *env, s Server) {
	if os.Getenv("GOGC") != "" {
		return
	}
	for s.Loading() {
		select {
		case <-e.ctx.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
	debug.SetGCPercent(100)
}
