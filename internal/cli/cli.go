// Package cli implements ptscope's subcommands. Each subcommand lives in its
// own file and has the signature of command.run; main only calls
// Options.MainStatus, with the pieces the CLI is kept free of (the HTTP
// server of serve: Options).
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime/debug"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/ptscope/ptscope/internal/check"
	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/report"
	"github.com/ptscope/ptscope/internal/term"
)

// Exit codes shared by every subcommand.
const (
	ExitOK        = 0 // success
	ExitThreshold = 1 // a `check` threshold was exceeded
	ExitUsage     = 2 // bad usage or unreadable input
	// ExitInterrupted: the command was interrupted (Ctrl-C, SIGTERM), as
	// a shell reports a command killed by SIGINT (128 + 2).
	ExitInterrupted = 130
)

// env is what a subcommand may touch: its streams and the context.
type env struct {
	ctx    context.Context
	stdin  io.Reader
	stdout io.Writer // escapes what could drive a terminal (term.SafeWriter)
	stderr io.Writer
	// rawStdout is stdout as given: for run (the training's own output)
	// and binary exports.
	rawStdout io.Writer
	checks    *check.Log // check --json's records (nil otherwise)

	budget int64          // --max-memory (0: the default)
	src    *input.Source  // made by source()
	over   chan error     // the budget watchdog's error (invoke)
	temps  *tempFiles     // output being written, removed if interrupted
	signal syscall.Signal // the signal that killed run's command (Status)
	opts   Options        // what the program supplies (serve's server)
}

type command struct {
	name    string
	summary string
	usage   string // full help text, examples included
	run     func(e *env, args []string) error
	// ownSignals: the command handles Ctrl-C itself (run forwards it to
	// the training and exits as it does); invoke does not interrupt it.
	ownSignals bool
}

// commands lists every subcommand. Add new ones here.
func commands() []command {
	return []command{
		analyzeCommand(),
		checkCommand(),
		demoCommand(),
		versionCommand(),
		estimateCommand(),
		runCommand(),
		serveCommand(),
		traceCommand(),
		exportCommand(),
		diffCommand(),
	}
}

// Version is the ptscope version, set by the release build.
var Version = "0.1.0-dev"

// Main runs ptscope with args (without the program name) and returns the exit code.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return Options{}.Main(ctx, args, stdin, stdout, stderr)
}

// Options are what the program gives the commands besides their
// arguments and streams: the pieces whose packages the CLI is kept free of,
// as google/pprof's driver.Options hands its driver an HTTP server. With
// the zero Options every command runs but serve, which fails saying so.
type Options struct {
	// NewServer makes serve's server over its inputs (serve.go); it fails
	// when it finds none. cmd/ptscope supplies internal/web's, so that
	// this package, and the --html pages it writes, compile without
	// net/http.
	NewServer func(ServeConfig) (Server, error)
}

// Main runs ptscope with args (without the program name) and returns its
// exit code, with the pieces o supplies.
func (o Options) Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return o.MainStatus(ctx, args, stdin, stdout, stderr).Code
}

// Status is how ptscope ends: with Code, or, where Signal is set (`run`
// of a command that a signal killed), by dying of that signal if the
// platform lets a Go program do so, else with Code (128+N, as a shell).
type Status struct {
	Code   int
	Signal syscall.Signal
}

// CommandExit is the error of a command that ends ptscope as the program
// it ran ended (`run`): nothing is printed for it.
type CommandExit struct {
	Code   int
	Signal syscall.Signal // the signal that killed the program, or 0
}

func (c *CommandExit) Error() string {
	if c.Signal != 0 {
		return fmt.Sprintf("the command was killed by %v", c.Signal)
	}
	return fmt.Sprintf("the command exited with status %d", c.Code)
}

// MainStatus is Main with the whole status: cmd/ptscope ends the process
// with it.
func MainStatus(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) Status {
	return Options{}.MainStatus(ctx, args, stdin, stdout, stderr)
}

// MainStatus is Main with the whole status, with the pieces o supplies.
func (o Options) MainStatus(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) Status {
	safe := term.NewSafeWriter(stdout) // no input's escape bytes reach the terminal
	defer safe.Flush()
	e := &env{ctx: ctx, stdin: stdin, stdout: safe, rawStdout: stdout, stderr: stderr, temps: &tempFiles{}, opts: o}
	code := mainEnv(e, args)
	return Status{Code: code, Signal: e.signal}
}

func mainEnv(e *env, args []string) int {
	stderr, stdout := e.stderr, e.rawStdout
	if len(args) == 0 {
		printUsage(stderr)
		return ExitUsage
	}
	name := args[0]
	switch name {
	case "--version", "-version", "-V":
		return invoke(versionCommand(), e, nil)
	case "help", "-h", "-help", "--help":
		if len(args) > 1 {
			if c, ok := lookup(args[1]); ok {
				// the command prints its usage and flags on -h
				return invoke(c, e, []string{"-h"})
			}
			fmt.Fprintf(stderr, "ptscope: unknown command %q\n", args[1])
			return ExitUsage
		}
		printUsage(stdout)
		return ExitOK
	}
	c, ok := lookup(name)
	if !ok {
		fmt.Fprintf(stderr, "ptscope: unknown command %q (run 'ptscope help')\n", name)
		return ExitUsage
	}
	return invoke(c, e, args[1:])
}

// invoke runs c, turning a panic into exit 2 with one line: a bug, but
// the user still gets a clear message and an exit code instead of a trace.
// The command runs on a goroutine of its own so that the memory budget's
// watchdog (env.source) can end it: its error is printed and returned as
// exit 2 at once, and the command, abandoned, is left to the caller (main
// exits; a test that runs Main in its process leaves it to finish). The
// runtime's soft memory limit the command set is restored.
//
// When Main's context ends (Ctrl-C), the command's context ends with it:
// readers stop at their next check, writers remove their temporary files
// and commit nothing. invoke waits interruptGrace for that, then returns
// ExitInterrupted whatever the command did (a command still busy is
// abandoned as above, and the temporary files it registered with
// env.temp are removed), so that an interrupted command ends within a
// second and leaves no output that looks complete.
func invoke(c command, e *env, args []string) int {
	parent := e.ctx
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	e.ctx, e.over = ctx, make(chan error, 1)
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	done := make(chan int, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				fmt.Fprintf(e.stderr, "ptscope: internal error in %s: %v (please report it)\n", c.name, r)
				done <- ExitUsage
			}
		}()
		err := c.run(e, args)
		var ce *CommandExit
		if errors.As(err, &ce) {
			e.signal = ce.Signal
		}
		if e.src != nil {
			e.src.Close() // streams Find opened and nothing read
		}
		if parent.Err() != nil && !c.ownSignals {
			done <- ExitInterrupted // invoke says so, once
			return
		}
		done <- exitCode(e.stderr, err)
	}()
	select {
	case code := <-done:
		if parent.Err() != nil && !c.ownSignals {
			return e.interrupted()
		}
		return code
	case err := <-e.over:
		return exitCode(e.stderr, err)
	case <-doneOrNever(parent, c.ownSignals):
		cancel()
		select {
		case <-done:
		case <-time.After(interruptGrace):
		}
		return e.interrupted()
	}
}

func lookup(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

func printUsage(w io.Writer) {
	fmt.Fprint(w, "ptscope: where GPU memory and time go in PyTorch training\n\nUsage: ptscope COMMAND [flags] [inputs]\n\nCommands:\n")
	cs := commands()
	sort.Slice(cs, func(i, j int) bool { return cs[i].name < cs[j].name })
	for _, c := range cs {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, "\nRun 'ptscope help COMMAND' or 'ptscope COMMAND -h' for flags and examples.\n")
}

// thresholdError reports exceeded `check` thresholds (exit 1).
type thresholdError struct{ failures []string }

func (t *thresholdError) Error() string { return strings.Join(t.failures, "; ") }

// usageError is bad usage (exit 2, message printed as is).
type usageError struct{ msg string }

func (u *usageError) Error() string { return u.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

func exitCode(stderr io.Writer, err error) int {
	if err == nil {
		return ExitOK
	}
	var ce *CommandExit
	if errors.As(err, &ce) {
		return ce.Code // the command has spoken for itself
	}
	if errors.Is(err, flag.ErrHelp) {
		return ExitOK
	}
	var te *thresholdError
	if errors.As(err, &te) {
		for _, f := range te.failures {
			fmt.Fprintf(stderr, "check failed: %s\n", f)
		}
		return ExitThreshold
	}
	msg := input.Escape(strings.ReplaceAll(err.Error(), "\n", " ")) // no raw escape bytes from file names
	fmt.Fprintf(stderr, "ptscope: %s\n", msg)
	return ExitUsage
}

// newFlagSet makes a FlagSet whose -h prints the command's usage text and
// flags on stdout. The flag package itself prints nothing: a parse error
// is returned by parseFlags as one line, naming flags as users type them.
func newFlagSet(e *env, c command) *flag.FlagSet {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		fmt.Fprint(e.stdout, c.usage)
		printFlags(e.stdout, fs, term.Width(e.stdout))
	}
	return fs
}

// printFlags lists a command's flags as users type them (--flag VALUE),
// with their help wrapped to width and their default. The standard library
// writes -flag. A default of -1 is the "not given" sentinel of an optional
// number and is not shown (the help says what not giving it does).
func printFlags(w io.Writer, fs *flag.FlagSet, width int) {
	first := true
	fs.VisitAll(func(f *flag.Flag) {
		if first {
			fmt.Fprintln(w, "\nFlags:")
			first = false
		}
		name, usage := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if name != "" {
			line += " " + name
		}
		fmt.Fprintln(w, line)
		def := ""
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "-1" {
			def = fmt.Sprintf(" (default %s)", f.DefValue)
			if name == "string" || strings.ContainsAny(f.DefValue, " ") {
				def = fmt.Sprintf(" (default %q)", f.DefValue)
			}
		}
		// the help is one paragraph, wrapped here
		for _, l := range report.Wrap(strings.ReplaceAll(usage, "\n", " ")+def, width, "        ", "        ") {
			fmt.Fprintln(w, l)
		}
	})
}

// parseFlags parses args with fs: -h prints the usage (flag.ErrHelp is
// returned), any other error is a usage error of one line such as
// "analyze: unknown flag --bogus (see ptscope help analyze)".
func parseFlags(fs *flag.FlagSet, args []string) error {
	usage := fs.Usage
	fs.Usage = func() {} // the flag package calls it on every error
	err := fs.Parse(args)
	fs.Usage = usage
	if err == nil {
		return nil
	}
	if errors.Is(err, flag.ErrHelp) {
		usage()
		return err
	}
	return flagError(fs.Name(), err)
}

// flagErrors rewrite the flag package's messages, which name flags with
// one dash.
var flagErrors = []struct {
	re   *regexp.Regexp
	repl string
}{
	{regexp.MustCompile(`^flag provided but not defined: -+(.*)$`), "unknown flag --$1 (see ptscope help CMD)"},
	{regexp.MustCompile(`^flag needs an argument: -+(.*)$`), "--$1 needs a value"},
	{regexp.MustCompile(`(?s)^invalid value (".*") for flag -([^:]+): (.*)$`), "--$2 $1: $3"},
	{regexp.MustCompile(`(?s)^invalid boolean value (".*") for -([^:]+): (.*)$`), "--$2 $1: not true or false"},
	{regexp.MustCompile(`(?s)^invalid boolean flag ([^:]+): (.*)$`), "--$1: $2"},
	{regexp.MustCompile(`^bad flag syntax: (.*)$`), "bad flag syntax: $1 (see ptscope help CMD)"},
}

func flagError(cmd string, err error) error {
	msg := err.Error()
	for _, r := range flagErrors {
		if r.re.MatchString(msg) {
			msg = r.re.ReplaceAllString(msg, strings.ReplaceAll(r.repl, "CMD", cmd))
			break
		}
	}
	return &usageError{cmd + ": " + msg}
}

// parseInterspersed parses flags that may come after positional arguments
// (`ptscope analyze snap.pickle --json`), stopping at "--".
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parseFlags(fs, args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func versionCommand() command {
	c := command{
		name:    "version",
		summary: "print the ptscope version",
		usage:   "Usage: ptscope version\n",
	}
	c.run = func(e *env, args []string) error {
		pos, err := parseInterspersed(newFlagSet(e, c), args)
		if err != nil {
			return err
		}
		if len(pos) > 0 {
			return usagef("version: takes no argument (%q)", pos[0])
		}
		fmt.Fprintf(e.stdout, "ptscope %s\n", Version)
		return nil
	}
	return c
}

// tuneGC lets the heap grow 4x between collections unless the user set
// GOGC: decoding a snapshot allocates steadily and the default collects
// several times per second for no gain. Measured on a 1M-entry snapshot:
// about 1.5x faster for about 25% more peak RSS (still a third of Python's).
func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
}
