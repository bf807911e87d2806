package web

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestGuardCrossSite: an API request from another site's page is refused
// whatever it asks (issue 28: Origin evil.example with Sec-Fetch-Mode
// no-cors got 10.7 MB), one from the server's own page or from a script
// is answered, and every answer carries the security headers.
func TestGuardCrossSite(t *testing.T) {
	_, ts, _ := testServer(t)
	for _, c := range []struct {
		name    string
		headers map[string]string
		want    int
	}{
		{"script", nil, 200},
		{"same origin", map[string]string{"Origin": ts.URL, "Sec-Fetch-Site": "same-origin"}, 200},
		{"typed URL", map[string]string{"Sec-Fetch-Site": "none"}, 200},
		{"evil origin", map[string]string{"Origin": "https://evil.example"}, 403},
		{"evil no-cors", map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Site": "cross-site"}, 403},
		{"cross site, no origin", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403},
		{"same site other port", map[string]string{"Sec-Fetch-Site": "same-site", "Origin": "http://127.0.0.1:1"}, 403},
		{"null origin", map[string]string{"Origin": "null"}, 403},
	} {
		req, _ := http.NewRequest("GET", ts.URL+"/api/v1/mem/summary?input=0", nil)
		for k, v := range c.headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s: %d %s", c.name, resp.StatusCode, body)
		}
		if c.want == 403 && (len(body) > 200 || strings.Contains(string(body), "peak")) {
			t.Errorf("%s: refused with data: %s", c.name, body)
		}
		for k, v := range securityHeaders {
			if resp.Header.Get(k) != v {
				t.Errorf("%s: %s: %q", c.name, k, resp.Header.Get(k))
			}
		}
	}
	if !strings.Contains(securityHeaders["Content-Security-Policy"], "frame-ancestors 'none'") {
		t.Error("the CSP allows framing")
	}
}

// TestGuardHost: DNS rebinding (a name that is not loopback in Host) is
// refused, also with --allow-remote, unless --allow-host names it; IP
// literals are answered when remote.
func TestGuardHost(t *testing.T) {
	for _, c := range []struct {
		local bool
		allow []string
		host  string
		ok    bool
	}{
		{true, nil, "127.0.0.1:8080", true},
		{true, nil, "localhost:8080", true},
		{true, nil, "[::1]:8080", true},
		{true, nil, "evil.example:8080", false},
		{true, nil, "10.0.0.5:8080", false},
		{false, nil, "evil.example:8080", false},
		{false, nil, "10.0.0.5:8080", true},
		{false, []string{"gpu-box.lan"}, "gpu-box.lan:8080", true},
		{false, []string{"gpu-box.lan"}, "evil.example", false},
		{true, []string{"tunnel.internal"}, "tunnel.internal:9000", true},
	} {
		g := newGuard(c.local, c.allow, 0, 2)
		if got := g.hostAllowed(c.host); got != c.ok {
			t.Errorf("local %v allow %v host %s: %v", c.local, c.allow, c.host, got)
		}
	}
}

// TestGuardErrorsDoNotEcho: an error answer does not carry back what the
// request sent (a 900 KB query came back whole), and a viewport larger
// than maxViewPixels is refused before any work.
func TestGuardErrorsDoNotEcho(t *testing.T) {
	_, ts, _ := testServer(t)
	long := strings.Repeat("A", 900_000)
	for _, path := range []string{
		"/api/v1/mem/view?input=0&w=" + long,
		"/api/v1/mem/names?input=0&by=" + long,
		"/api/v1/no-such-endpoint-" + strings.Repeat("B", 5000),
		"/api/v1/mem/view?input=0&w=16384&h=16384",
	} {
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode < 400 || len(body) > maxErrorBytes+64 || strings.Contains(string(body), "AAAA") || strings.Contains(string(body), "BBBB") {
			t.Errorf("%.60s: %d, %d bytes: %.200s", path, resp.StatusCode, len(body), body)
		}
	}
}

// TestGuardSlots: one input's views take at most perInput of the slots, so
// another input's view gets one at once; past that, a request waits, and
// gets 503 after the wait.
func TestGuardSlots(t *testing.T) {
	g := newGuard(true, nil, 0, 2)
	g.wait = 50 * time.Millisecond
	req := func(input string) *http.Request {
		return httptest.NewRequest("GET", "/api/v1/mem/view?input="+input, nil)
	}
	rel0, ok := g.acquire(req("0"))
	if !ok {
		t.Fatal("first slot refused")
	}
	start := time.Now()
	if _, ok := g.acquire(req("0")); ok || time.Since(start) < g.wait {
		t.Fatalf("a second view of input 0 got a slot (%v)", time.Since(start))
	}
	rel1, ok := g.acquire(req("1"))
	if !ok {
		t.Fatal("input 1 was blocked by input 0")
	}
	rel0()
	rel0b, ok := g.acquire(req("0"))
	if !ok {
		t.Fatal("input 0 got no slot once one was free")
	}
	rel0b()
	rel1()
	// the handler reads "00", "+0" (%2B0), "-0" and no input as input 0: so does
	// the slot count (one slow input never takes every slot)
	rel0, ok = g.acquire(req("0"))
	if !ok {
		t.Fatal("input 0 got no slot")
	}
	for _, alias := range []string{"00", "%2B0", "-0", ""} {
		if _, ok := g.acquire(req(alias)); ok {
			t.Errorf("input=%q took a second slot of input 0", alias)
		}
	}
	rel0()
}
