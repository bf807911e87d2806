// Command serveload puts a running ptscope serve under load: many clients
// asking for the worst-case views of every input (full-range memory views
// of the largest size the server takes and of a larger one, every stack's
// breakdown, full-span trace views, diffs), with cross-site requests
// mixed in, for a while; a probe meanwhile asks for the input list and a
// summary. It prints what the clients got, how the probe was answered and
// the server's peak RSS (from /proc, given its pid), and fails when a
// cross-site request was answered, the probe went unanswered, no view was
// answered, or the peak RSS passed -max-rss-mib (2 GiB).
//
// Usage: go run ./scripts/serveload -url http://127.0.0.1:8080 -pid PID
// (scripts/bench_serve_load.sh starts the server and runs it).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type input struct {
	ID      int    `json:"id"`
	Kind    string `json:"kind"`
	Status  string `json:"status"`
	Devices []struct {
		Device  int `json:"device"`
		Entries int `json:"entries"`
	} `json:"devices"`
}

type stats struct {
	mu        sync.Mutex
	byStatus  map[int]int
	latencies []time.Duration
	bytes     int64
	errors    int
	slow503   time.Duration // the longest a 503 took
}

func (s *stats) add(code int, d time.Duration, n int64, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.errors++
		return
	}
	s.byStatus[code]++
	if code == http.StatusServiceUnavailable {
		s.slow503 = max(s.slow503, d)
	}
	s.latencies = append(s.latencies, d)
	s.bytes += n
}

func (s *stats) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var codes []int
	for c := range s.byStatus {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	var parts []string
	total := 0
	for _, c := range codes {
		parts = append(parts, fmt.Sprintf("%d: %d", c, s.byStatus[c]))
		total += s.byStatus[c]
	}
	sort.Slice(s.latencies, func(i, j int) bool { return s.latencies[i] < s.latencies[j] })
	q := func(f float64) time.Duration {
		if len(s.latencies) == 0 {
			return 0
		}
		return s.latencies[min(len(s.latencies)-1, int(f*float64(len(s.latencies))))]
	}
	busy := ""
	if s.byStatus[http.StatusServiceUnavailable] > 0 {
		busy = fmt.Sprintf("; 503 within %v", s.slow503.Round(time.Millisecond))
	}
	return fmt.Sprintf("%d answers (%s), %d failed; latency p50 %v, p99 %v, max %v%s; %.1f MB received",
		total, strings.Join(parts, ", "), s.errors, q(0.5).Round(time.Millisecond), q(0.99).Round(time.Millisecond),
		q(1).Round(time.Millisecond), busy, float64(s.bytes)/1e6)
}

func main() {
	base := flag.String("url", "http://127.0.0.1:8080", "the server")
	pid := flag.Int("pid", 0, "the server's process id (for its RSS)")
	clients := flag.Int("clients", 50, "clients asking at once")
	duration := flag.Duration("duration", 15*time.Second, "how long")
	maxRSS := flag.Int64("max-rss-mib", 2048, "fail when the server's peak RSS passes this (with -pid)")
	flag.Parse()
	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: *clients + 4}}

	var ins struct{ Inputs []input }
	if err := getJSON(client, *base+"/api/v1/inputs", &ins); err != nil {
		fail("inputs: %v", err)
	}
	var worst []string
	snaps := 0
	for _, in := range ins.Inputs {
		if in.Status != "ready" {
			fail("input %d is %s: wait until every input is ready", in.ID, in.Status)
		}
		id := strconv.Itoa(in.ID)
		switch in.Kind {
		case "snapshot":
			snaps++
			last := 0
			if len(in.Devices) > 0 {
				last = in.Devices[0].Entries - 1
			}
			keys := make([]string, 2000)
			for i := range keys {
				keys[i] = strconv.Itoa(i)
			}
			worst = append(worst,
				"/api/v1/mem/view?input="+id+"&w=16384&h=16384",
				"/api/v1/mem/view?input="+id+"&w=8192&h=4096",
				"/api/v1/mem/view?input="+id+"&w=8192&h=4096&keys=all&color=stack",
				"/api/v1/mem/breakdown?input="+id+"&by=stack",
				"/api/v1/mem/breakdown?input="+id+"&by=source&event="+strconv.Itoa(last),
				"/api/v1/mem/state?input="+id+"&event="+strconv.Itoa(last/2),
				"/api/v1/mem/names?input="+id+"&by=stack&keys="+strings.Join(keys, ","),
				"/api/v1/mem/summary?input="+id,
				"/api/v1/diff?a="+id+"&b="+id,
			)
		case "trace":
			worst = append(worst,
				"/api/v1/trace/view?input="+id+"&w=16384",
				"/api/v1/trace/memory?input="+id+"&w=16384",
				"/api/v1/trace/summary?input="+id,
			)
		}
	}
	if len(worst) == 0 {
		fail("no inputs")
	}
	fmt.Printf("%d inputs, %d worst-case requests, %d clients for %v\n", len(ins.Inputs), len(worst), *clients, *duration)

	var peakRSS atomic.Int64
	done := make(chan struct{})
	if *pid > 0 {
		go func() {
			for {
				if v := procKB(*pid, "VmRSS:"); v > peakRSS.Load() {
					peakRSS.Store(v)
				}
				select {
				case <-done:
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
		}()
	}
	load := &stats{byStatus: map[int]int{}}
	cross := &stats{byStatus: map[int]int{}}
	probe := &stats{byStatus: map[int]int{}}
	end := time.Now().Add(*duration)
	var wg sync.WaitGroup
	for c := 0; c < *clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for i := c; time.Now().Before(end); i++ {
				path := worst[i%len(worst)]
				if i%5 == 0 {
					// a page of another site asking (what the issue's
					// evil.example did), or a rebinding name
					h := map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"}
					if i%10 == 0 {
						h = map[string]string{"Host": "evil.example"}
					}
					code, d, n, err := get(client, *base+path, h)
					cross.add(code, d, n, err)
					continue
				}
				code, d, n, err := get(client, *base+path, nil)
				load.add(code, d, n, err)
			}
		}(c)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for time.Now().Before(end) {
			code, d, n, err := get(client, *base+"/api/v1/inputs", nil)
			probe.add(code, d, n, err)
			time.Sleep(250 * time.Millisecond)
		}
	}()
	wg.Wait()
	close(done)
	fmt.Printf("load:        %s\n", load)
	fmt.Printf("cross-site:  %s\n", cross)
	fmt.Printf("probe:       %s\n", probe)
	if *pid > 0 {
		fmt.Printf("server RSS:  peak %d MiB sampled, VmHWM %d MiB\n", peakRSS.Load()>>10, procKB(*pid, "VmHWM:")>>10)
	}
	bad := false
	if *pid > 0 && peakRSS.Load()>>10 > *maxRSS {
		fmt.Printf("FAIL: peak RSS %d MiB, bound %d MiB\n", peakRSS.Load()>>10, *maxRSS)
		bad = true
	}
	load.mu.Lock()
	if load.byStatus[200] == 0 {
		fmt.Println("FAIL: no worst-case view was answered")
		bad = true
	}
	load.mu.Unlock()
	cross.mu.Lock()
	if cross.byStatus[200] > 0 {
		fmt.Printf("FAIL: %d cross-site requests answered\n", cross.byStatus[200])
		bad = true
	}
	cross.mu.Unlock()
	probe.mu.Lock()
	if probe.errors > 0 || probe.byStatus[200] == 0 {
		fmt.Printf("FAIL: the probe got %d failures, %d answers\n", probe.errors, probe.byStatus[200])
		bad = true
	}
	probe.mu.Unlock()
	if bad {
		os.Exit(1)
	}
}

func get(c *http.Client, url string, headers map[string]string) (int, time.Duration, int64, error) {
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		return 0, 0, 0, err
	}
	req.Header.Set("Accept-Encoding", "gzip")
	for k, v := range headers {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return 0, time.Since(start), 0, err
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, time.Since(start), n, err
}

func getJSON(c *http.Client, url string, v any) error {
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// procKB reads a "Name:   N kB" line of /proc/PID/status (0 if none).
func procKB(pid int, name string) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, name); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n
			}
		}
	}
	return 0
}

func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "serveload: "+format+"\n", a...)
	os.Exit(2)
}
