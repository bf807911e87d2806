package cli

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ptscope/ptscope/internal/testfixture"
	"github.com/ptscope/ptscope/internal/web"
)

// serveOptions are cmd/ptscope's: serve with internal/web's server.
var serveOptions = Options{NewServer: func(c ServeConfig) (Server, error) {
	s, err := web.New(web.Options{Roots: c.Roots, Rescan: c.Rescan, Log: c.Log, AfterRead: c.AfterRead, Source: c.Source, AllowHosts: c.AllowHosts})
	if err != nil {
		return nil, err
	}
	return s, nil
}}

func TestLoopbackAddr(t *testing.T) {
	for addr, want := range map[string]bool{"127.0.0.1:8080": true, "localhost:0": true, "[::1]:80": true, "0.0.0.0:8080": false, ":8080": false, "10.0.0.1:80": false} {
		if isLoopbackAddr(addr) != want {
			t.Errorf("%s: %v", addr, !want)
		}
	}
}

// serve's checks answer in their order, each with its one line: the
// flags and the address first, then the server's own (no input found),
// then the listen; without a server (the zero Options) serve says so.
func TestServeErrors(t *testing.T) {
	snap := testfixture.Testdata(t, "snapshots", "oom_fragmentation.pickle.xz")
	missing := filepath.Join(t.TempDir(), "nope.pickle")
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	taken := busy.Addr().String()
	for _, c := range []struct {
		opts Options
		args []string
		want string
	}{
		{serveOptions, []string{"serve"}, "ptscope: serve: no input (give snapshot or trace files"},
		{serveOptions, []string{"serve", "--addr", "10.0.0.1:80", snap}, "ptscope: serve: --addr 10.0.0.1:80 is not a loopback address; add --allow-remote"},
		{Options{}, []string{"serve", "--addr", "10.0.0.1:80", snap}, "is not a loopback address"},
		{Options{}, []string{"serve", snap}, "ptscope: serve: this build of ptscope has no web server"},
		{serveOptions, []string{"serve", "--addr", taken, missing}, missing + ": no such file"},
		{serveOptions, []string{"serve", "--addr", taken, snap}, "ptscope: serve: listen tcp " + taken + ": "},
	} {
		var so, se bytes.Buffer
		code := c.opts.Main(context.Background(), c.args, strings.NewReader(""), &so, &se)
		if code != ExitUsage || !strings.Contains(se.String(), c.want) || strings.Count(se.String(), "\n") != 1 {
			t.Errorf("%q: exit %d, stderr %q; want exit 2 and %q", c.args, code, se.String(), c.want)
		}
	}
}

// lockedBuffer is a bytes.Buffer that a command writes while a test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// serve, with the server cmd/ptscope supplies, prints its URL, answers it,
// and stops when its context ends.
func TestServeAnswers(t *testing.T) {
	snap := testfixture.Testdata(t, "snapshots", "oom_fragmentation.pickle.xz")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var se lockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- serveOptions.Main(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--rescan", "0", snap}, strings.NewReader(""), io.Discard, &se)
	}()
	var url string
	deadline := time.Now().Add(30 * time.Second)
	for url == "" {
		if _, rest, ok := strings.Cut(se.String(), "ptscope serve: "); ok {
			url, _, _ = strings.Cut(rest, " ")
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no URL printed: %q", se.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	resp, err := http.Get(url + "api/v1/inputs")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"path":"`+snap+`"`) {
		t.Fatalf("%s: %d %s", url, resp.StatusCode, b)
	}
	cancel()
	select {
	case code := <-done:
		if code != ExitInterrupted {
			t.Errorf("serve ended with exit %d, want %d", code, ExitInterrupted)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve still running 10 s after its context ended")
	}
}
