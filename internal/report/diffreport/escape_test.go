package diffreport

import (
	"html"
	"testing"
)

// TestEscapeHTMLAsStdlib: escapeHTML is html.EscapeString byte for byte.
func TestEscapeHTMLAsStdlib(t *testing.T) {
	for _, s := range []string{"", "plain", `<a href="x">&'</a>`, "aten::mm <-> 'q' & \"r\"", "\x00\u2028&amp;"} {
		if got, want := escapeHTML(s), html.EscapeString(s); got != want {
			t.Errorf("escapeHTML(%q) = %q, html.EscapeString: %q", s, got, want)
		}
	}
}
