package cli

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestUnknownFlag: an unknown flag is one line on stderr naming it as the
// user typed it, nothing on stdout (so `--json | jq` never reads usage), exit 2.
func TestUnknownFlag(t *testing.T) {
	for _, c := range commands() {
		for _, args := range [][]string{{"--bogus"}, {"-bogus"}, {"x.pickle", "--bogus"}} {
			if c.name == "run" && len(args) > 1 {
				continue // run's flags end at the command, which it would run
			}
			code, out, errs := run(t, append([]string{c.name}, args...)...)
			want := "ptscope: " + c.name + ": unknown flag --bogus (see ptscope help " + c.name + ")\n"
			if code != 2 || out != "" || errs != want {
				t.Errorf("%s %v: exit %d, stdout %q, stderr %q; want exit 2, no stdout, stderr %q", c.name, args, code, out, errs, want)
			}
		}
	}
}

// TestFlagValueErrors: a bad flag value names the flag with two dashes.
func TestFlagValueErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"analyze", "--top", "x", "a.pickle"}, `ptscope: analyze: --top "x": parse error`},
		{[]string{"analyze", "--top"}, "ptscope: analyze: --top needs a value"},
		{[]string{"analyze", "--top", "0", "a.pickle"}, "ptscope: --top must be at least 1, not 0"},
		{[]string{"demo", "--top", "-1"}, "ptscope: --top must be at least 1, not -1"},
		{[]string{"trace", "--top", "-1", "a.json"}, "ptscope: trace: --top must be at least 1, not -1"},
		{[]string{"analyze", "--json=maybe", "a.pickle"}, `ptscope: analyze: --json "maybe": not true or false`},
		{[]string{"analyze", "--max-memory", "1MiB", "a.pickle"}, `ptscope: analyze: --max-memory "1MiB": too small (at least 64MiB)`},
		{[]string{"estimate", "--model", "gpt2", "--dtype", "fp8"}, `ptscope: estimate: --dtype "fp8": unknown dtype`},
		{[]string{"demo", "extra.pickle"}, "ptscope: demo: takes no input"},
		{[]string{"diff", "--steps", "all", "a", "b"}, "ptscope: diff: unknown flag --steps"},
	} {
		code, out, errs := run(t, c.args...)
		if code != 2 || out != "" || strings.Count(errs, "\n") != 1 || !strings.HasPrefix(errs, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line starting %q", c.args, code, out, errs, c.want)
		}
	}
}

// TestHelpFitsWidth: every command's help fits 80 columns, its flags'
// help is wrapped to narrower terminals too, and the -1 "not given"
// sentinel of optional numbers is not shown as a default.
func TestHelpFitsWidth(t *testing.T) {
	for _, width := range []string{"80", "60"} {
		t.Setenv("COLUMNS", width)
		for _, c := range commands() {
			code, out, errs := run(t, "help", c.name)
			if code != 0 || errs != "" || !strings.Contains(out, "Usage: ptscope "+c.name) {
				t.Fatalf("help %s: exit %d, stderr %q", c.name, code, errs)
			}
			inFlags := false
			for _, l := range strings.Split(out, "\n") {
				inFlags = inFlags || l == "Flags:"
				limit := 80
				if inFlags && width == "60" {
					limit = 60
				}
				if n := utf8.RuneCountInString(l); n > limit {
					t.Errorf("COLUMNS=%s help %s: %d columns: %q", width, c.name, n, l)
				}
			}
			if strings.Contains(out, "(default -1)") {
				t.Errorf("help %s shows the -1 sentinel as a default", c.name)
			}
		}
	}
	_, out, _ := run(t, "help", "analyze")
	if !strings.Contains(out, "  --top int\n        rows of ranked tables") || !strings.Contains(out, "(default 10)") {
		t.Errorf("help analyze: flags not listed as --flag with their help and default:\n%s", out)
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}} {
		code, out, errs := run(t, args...)
		if code != 0 || out != "ptscope "+Version+"\n" || errs != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errs)
		}
	}
}
