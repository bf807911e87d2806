package web

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/testfixture"
	"github.com/ptscope/ptscope/internal/web/view"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// The statuses of a view.Input.
const (
	statusQueued  = "queued"
	statusLoading = "loading"
	statusReady   = "ready"
)

// testServer serves a committed real snapshot, a generated trace and a
// file that is not an input, and waits until all are loaded.
func testServer(t testing.TB) (*Server, *httptest.Server, string) {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(testfixture.Root(t), "testdata", "snapshots", "validate_gpt2tiny_fp32.pickle.xz")
	link(t, src, filepath.Join(dir, "a_snapshot.pickle.xz"))
	if err := os.WriteFile(filepath.Join(dir, "b_trace.json"), []byte(smallTrace), 0o644); err != nil {
		t.Fatal(err)
	}
	// a pickle header followed by garbage: found as a snapshot, fails to load
	if err := os.WriteFile(filepath.Join(dir, "c_broken.pickle"), []byte("\x80\x04\x95garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, ts := serveDir(t, dir)
	return s, ts, dir
}

// serveDir serves the files in dir and waits until all are loaded.
func serveDir(t testing.TB, dir string) (*Server, *httptest.Server) {
	t.Helper()
	s, err := New(Options{Roots: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	s.Start(ctx)
	ts := httptest.NewServer(s.Handler(true))
	t.Cleanup(ts.Close)
	deadline := time.Now().Add(30 * time.Second)
	for {
		done := true
		for _, in := range s.set.List() {
			if in.Status == statusQueued || in.Status == statusLoading {
				done = false
			}
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("inputs did not load")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return s, ts
}

func link(t testing.TB, src, dst string) {
	t.Helper()
	os.MkdirAll(filepath.Dir(dst), 0o755)
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// smallTrace is a Kineto trace with two steps, nested ops, kernels and
// memory events.
const smallTrace = `{"schemaVersion":1,"deviceProperties":[{"id":0,"name":"NVIDIA H100","totalGlobalMem":85000000000,"numSms":132}],
"traceEvents":[
{"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":1,"tid":1,"ts":1000,"dur":1000},
{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":1100,"dur":300,"args":{"External id":1,"Input Dims":[[4,4],[4,4]]}},
{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":1150,"dur":20,"args":{"correlation":11,"External id":1}},
{"ph":"X","cat":"kernel","name":"sm90_gemm","pid":0,"tid":7,"ts":1200,"dur":500,"args":{"correlation":11,"device":0,"stream":7,"blocks per SM":1.5,"est. achieved occupancy %":40,"grid":[8,1,1],"block":[128,1,1]}},
{"ph":"X","cat":"user_annotation","name":"ProfilerStep#2","pid":1,"tid":1,"ts":2000,"dur":1000},
{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":2100,"dur":300,"args":{"External id":2,"Input Dims":[[4,4],[4,4]]}},
{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":2150,"dur":20,"args":{"correlation":12,"External id":2}},
{"ph":"X","cat":"kernel","name":"sm90_gemm","pid":0,"tid":7,"ts":2200,"dur":600,"args":{"correlation":12,"device":0,"stream":7,"blocks per SM":1.5,"est. achieved occupancy %":40,"grid":[8,1,1],"block":[128,1,1]}},
{"ph":"i","s":"t","cat":"cpu_instant_event","name":"[memory]","pid":1,"tid":1,"ts":1100,"args":{"Device Type":1,"Device Id":0,"Addr":1,"Bytes":1024,"Total Allocated":1024,"Total Reserved":2097152}},
{"ph":"i","s":"t","cat":"cpu_instant_event","name":"[memory]","pid":1,"tid":1,"ts":2500,"args":{"Device Type":1,"Device Id":0,"Addr":1,"Bytes":-1024,"Total Allocated":0,"Total Reserved":2097152}}
]}`

func get(t *testing.T, ts *httptest.Server, path string, host ...string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, ts.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(host) > 0 {
		req.Host = host[0]
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// dropTimes removes what varies between runs (load times).
func dropTimes(v any) {
	switch x := v.(type) {
	case map[string]any:
		delete(x, "load_ns")
		for _, y := range x {
			dropTimes(y)
		}
	case []any:
		for _, y := range x {
			dropTimes(y)
		}
	}
}

// golden compares got (JSON, re-indented) with testdata/NAME.golden.json.
func golden(t *testing.T, name string, got []byte, dir string) {
	t.Helper()
	got = bytes.ReplaceAll(got, []byte(dir), []byte("DIR"))
	var v any
	if err := json.Unmarshal(got, &v); err != nil {
		t.Fatalf("%s: %v: %s", name, err, got)
	}
	dropTimes(v)
	ind, _ := json.MarshalIndent(v, "", "  ")
	ind = append(ind, '\n')
	p := filepath.Join("testdata", name+".golden.json")
	if *update {
		os.MkdirAll("testdata", 0o755)
		if err := os.WriteFile(p, ind, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/web -update)", err)
	}
	if !bytes.Equal(ind, want) {
		t.Errorf("%s differs from %s (go test ./internal/web -update rewrites it):\n%s", name, p, firstDiff(string(ind), string(want)))
	}
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) && i < len(bl); i++ {
		if al[i] != bl[i] {
			return "got:  " + al[i] + "\nwant: " + bl[i]
		}
	}
	return "lengths differ"
}

func TestEndpointsGolden(t *testing.T) {
	_, ts, dir := testServer(t)
	for _, c := range []struct{ name, path string }{
		{"inputs", "/api/v1/inputs"},
		{"mem_block", "/api/v1/mem/block?input=0&id=40"},
		{"mem_hit", "/api/v1/mem/hit?input=0&event=300&y=1000000"},
		{"mem_state", "/api/v1/mem/state?input=0&event=250"},
		{"mem_event", "/api/v1/mem/event?input=0&event=250"},
		{"mem_breakdown_category", "/api/v1/mem/breakdown?input=0&by=category"},
		{"mem_breakdown_source", "/api/v1/mem/breakdown?input=0&by=source&event=300"},
		{"trace_view", "/api/v1/trace/view?input=1&w=200"},
		{"trace_event", "/api/v1/trace/event?input=1&event=3"},
		{"trace_event_op", "/api/v1/trace/event?input=1&event=1"},
		{"mem_names_source", "/api/v1/mem/names?input=0&by=source&keys=0,1,2"},
		{"trace_memory", "/api/v1/trace/memory?input=1&w=20"},
	} {
		code, body := get(t, ts, c.path)
		if code != 200 {
			t.Fatalf("%s: %d %s", c.path, code, body)
		}
		golden(t, c.name, body, dir)
	}
	// summaries are the analyses' JSON: check what the page reads
	code, body := get(t, ts, "/api/v1/mem/summary?input=0")
	var ms view.MemSummary
	if code != 200 || json.Unmarshal(body, &ms) != nil || ms.Entries == 0 || ms.Result.Peak.AllocatedBytes == 0 || len(ms.Categories) < 8 {
		t.Fatalf("mem summary %d: %.300s", code, body)
	}
	code, body = get(t, ts, "/api/v1/trace/summary?input=1")
	var tsum struct {
		Result struct {
			Kernels []struct{ Name string } `json:"kernels"`
		} `json:"result"`
		Lanes []struct{ Name string } `json:"lanes"`
	}
	if code != 200 || json.Unmarshal(body, &tsum) != nil || len(tsum.Result.Kernels) != 1 || len(tsum.Lanes) != 2 {
		t.Fatalf("trace summary %d: %.300s", code, body)
	}
}

func TestBadRequests(t *testing.T) {
	s, ts, dir := testServer(t)
	s.mux.HandleFunc("/api/v1/panic", func(http.ResponseWriter, *http.Request) { panic("boom") })
	for _, c := range []struct {
		path string
		code int
		msg  string
	}{
		{"/api/v1/mem/view?input=9", 404, "no input 9"},
		{"/api/v1/mem/view?input=x", 400, "not an integer"},
		{"/api/v1/mem/view?input=0&x0=5&x1=5", 400, "not within"},
		{"/api/v1/mem/view?input=0&x0=0&x1=99999999", 400, "not within"},
		{"/api/v1/mem/view?input=0&w=0", 400, "out of range"},
		{"/api/v1/mem/view?input=0&hl=category", 400, "BREAKDOWN:KEY"},
		{"/api/v1/mem/view?input=0&color=rainbow", 400, "unknown breakdown"},
		{"/api/v1/mem/state?input=0&event=99999999", 404, "no event"},
		{"/api/v1/mem/state?input=0", 400, "missing parameter event"},
		{"/api/v1/mem/block?input=0&id=-1", 404, "no block"},
		{"/api/v1/mem/view?input=0&device=3", 404, "no device 3"},
		{"/api/v1/mem/view?input=1", 400, "is a trace"},
		{"/api/v1/trace/view?input=1&t0=5&t1=5", 400, "empty"},
		{"/api/v1/mem/state?input=0&time=1", 200, ""},
		{"/api/v1/trace/event?input=1&event=1000", 404, "no event"},
		{"/api/v1/mem/names?input=0&by=source&keys=99999", 404, "no source key 99999"},
		{"/api/v1/mem/names?input=0&by=source&keys=x", 400, "not an integer"},
		{"/api/v1/mem/names?input=0&by=nope", 400, "unknown breakdown"},
		{"/api/v1/mem/view?input=2", 422, "c_broken.pickle"},
		{"/api/v1/nothing", 404, "no such endpoint"},
		{"/nothing", 404, "no such page"},
		{"/api/v1/panic", 500, "internal error: boom"},
	} {
		code, body := get(t, ts, c.path)
		var e struct{ Error string }
		if code != c.code || json.Unmarshal(body, &e) != nil || !strings.Contains(e.Error, c.msg) || strings.Contains(e.Error, "\n") {
			t.Errorf("%s: %d %s, want %d with %q", c.path, code, body, c.code, c.msg)
		}
	}
	// the broken input is listed with its one-line error; the others work
	_, body := get(t, ts, "/api/v1/inputs")
	if !strings.Contains(string(body), `"status":"error"`) || !strings.Contains(string(body), filepath.Join(dir, "c_broken.pickle")+": ") {
		t.Errorf("inputs: %s", body)
	}
	if code, _ := get(t, ts, "/api/v1/mem/view?input=0"); code != 200 {
		t.Errorf("the good input fails beside the broken one: %d", code)
	}
	// DNS rebinding: a foreign Host is refused; loopback names are not
	if code, _ := get(t, ts, "/api/v1/inputs", "evil.example:8080"); code != 403 {
		t.Errorf("foreign host: %d", code)
	}
	if code, _ := get(t, ts, "/api/v1/inputs", "localhost:8080"); code != 200 {
		t.Errorf("localhost: %d", code)
	}
	resp, err := http.Post(ts.URL+"/api/v1/inputs", "text/plain", nil)
	if err != nil || resp.StatusCode != 405 {
		t.Errorf("POST: %v %v", resp.StatusCode, err)
	}
}

func TestPage(t *testing.T) {
	_, ts, _ := testServer(t)
	code, body := get(t, ts, "/?view=state&event=3")
	if code != 200 || !strings.Contains(string(body), `<script src="/ui/app.js">`) {
		t.Fatalf("%d %s", code, body)
	}
	for _, a := range []string{"/ui/app.js", "/ui/app.css"} {
		if code, body := get(t, ts, a); code != 200 || len(body) < 1000 {
			t.Fatalf("%s: %d, %d bytes", a, code, len(body))
		}
	}
}

// Views (and large JSON) are gzipped for clients that accept it, and the
// compressed body is the same view.
func TestViewGzip(t *testing.T) {
	_, ts, _ := testServer(t)
	fetch := func(enc string) (*http.Response, []byte) {
		req, _ := http.NewRequest(http.MethodGet, ts.URL+"/api/v1/mem/view?input=0&w=1200&h=500", nil)
		if enc != "" {
			req.Header.Set("Accept-Encoding", enc) // set by hand: the client then leaves the body as sent
		}
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	_, plain := fetch("")
	for _, c := range []struct {
		enc  string
		gzip bool
	}{{"", false}, {"gzip", true}, {"gzip, deflate, br, zstd", true}, {"deflate", false}, {"gzip;q=0", false}, {"GZIP;q=0.5", true}} {
		resp, body := fetch(c.enc)
		if got := resp.Header.Get("Content-Encoding") == "gzip"; got != c.gzip {
			t.Fatalf("Accept-Encoding %q: gzipped %v", c.enc, got)
		}
		if c.gzip {
			sent := len(body)
			zr, err := gzip.NewReader(bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			if body, err = io.ReadAll(zr); err != nil {
				t.Fatal(err)
			}
			if sent >= len(body) {
				t.Fatalf("gzip sent %d bytes for %d", sent, len(body))
			}
		}
		if !bytes.Equal(body, plain) {
			t.Fatalf("Accept-Encoding %q: the body differs", c.enc)
		}
		if resp.Header.Get("Server-Timing") == "" || resp.Header.Get("Vary") != "Accept-Encoding" {
			t.Fatalf("headers %v", resp.Header)
		}
	}
}

// A folder is searched again: a file written later is added once its size
// has settled, and loads.
func TestRescanFindsNewFiles(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(testfixture.Root(t), "testdata", "snapshots", "oom_capacity.pickle.xz")
	link(t, src, filepath.Join(dir, "first.pickle.xz"))
	s, err := New(Options{Roots: []string{dir}, Rescan: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s.Start(t.Context())
	link(t, src, filepath.Join(dir, "run2", "later.pickle.xz"))
	deadline := time.Now().Add(20 * time.Second)
	for {
		list := s.set.List()
		if len(list) == 2 && list[1].Status == statusReady {
			if !strings.HasSuffix(list[1].Path, "later.pickle.xz") {
				t.Fatalf("second input %s", list[1].Path)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new file was not picked up: %+v", list)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Any query on any endpoint is answered without a panic (a 500).
func FuzzAPI(f *testing.F) {
	for _, q := range []string{"mem/view?input=0&x0=0&x1=10&w=5&h=5", "mem/state?input=0&event=-1", "mem/hit?input=0&event=3&y=-5",
		"mem/view?input=0&hl=stack:99999999", "mem/breakdown?input=0&by=module_group&event=7", "trace/view?input=1&t0=-9&t1=99999999999&w=1",
		"trace/memory?input=1&t0=0&t1=1&w=16384", "mem/event?input=0&event=0", "mem/block?input=0&id=0", "mem/view?input=0&x0=1&x1=2&w=16384&h=1"} {
		f.Add(q)
	}
	s, ts, _ := testServer(f)
	_ = s
	f.Fuzz(func(t *testing.T, q string) {
		resp, err := http.Get(ts.URL + "/api/v1/" + q)
		if err != nil {
			return // not a URL
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusInternalServerError {
			t.Fatalf("%s: 500", q)
		}
	})
}

// An empty folder is served when it is rescanned (a capture about to
// write); without rescans it is an error.
func TestEmptyFolder(t *testing.T) {
	dir := t.TempDir()
	if _, err := New(Options{Roots: []string{dir}}); err == nil {
		t.Fatal("an empty folder without rescans was accepted")
	}
	s, err := New(Options{Roots: []string{dir}, Rescan: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(s.set.List()); n != 0 {
		t.Fatalf("%d inputs", n)
	}
}

// TestRootsInOrder: inputs are numbered in the order of the command line
// (each folder's files by path); a root that cannot be read is listed with
// its one-line error while the others load; "-" is read from the standard
// input once; only when every root fails is New an error.
func TestRootsInOrder(t *testing.T) {
	dir := t.TempDir()
	snap := filepath.Join(dir, "z_snapshot.pickle.xz")
	link(t, filepath.Join(testfixture.Root(t), "testdata", "snapshots", "validate_gpt2tiny_fp32.pickle.xz"), snap)
	sub := filepath.Join(dir, "traces")
	os.MkdirAll(sub, 0o755)
	for _, name := range []string{"b.json", "a.json"} {
		if err := os.WriteFile(filepath.Join(sub, name), []byte(smallTrace), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	missing := filepath.Join(dir, "nope.pickle")
	src := input.NewSource(0, strings.NewReader(smallTrace), nil)
	s, err := New(Options{Roots: []string{snap, missing, sub, "-"}, Rescan: time.Hour, Source: src})
	if err != nil {
		t.Fatal(err)
	}
	s.Start(t.Context())
	var got []string
	deadline := time.Now().Add(30 * time.Second)
	for {
		got = got[:0]
		busy := false
		for _, in := range s.set.List() {
			got = append(got, fmt.Sprintf("%d %s %s %s", in.ID, filepath.Base(in.Path), in.Kind, in.Status))
			busy = busy || in.Status == statusQueued || in.Status == statusLoading
			if in.Path == missing && !strings.Contains(in.Error, "nope.pickle") {
				t.Errorf("missing root's error: %q", in.Error)
			}
		}
		if !busy {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("inputs did not load")
		}
		time.Sleep(10 * time.Millisecond)
	}
	want := []string{"0 z_snapshot.pickle.xz snapshot ready", "1 nope.pickle unknown error", "2 a.json trace ready", "3 b.json trace ready", "4 - trace ready"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("inputs:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// a rescan searches the folder only: "-" is not read again, and the
	// missing path is not an error each time
	if err := s.set.Scan(s.opts.Roots, false); err != nil {
		t.Errorf("rescan: %v", err)
	}
	if n := len(s.set.List()); n != len(want) {
		t.Errorf("after a rescan: %d inputs", n)
	}
	if _, err := New(Options{Roots: []string{missing, filepath.Join(dir, "nope2")}}); err == nil || !strings.Contains(err.Error(), "nope.pickle") {
		t.Errorf("every root missing: %v", err)
	}
}
