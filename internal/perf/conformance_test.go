package perf

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/kineto"
)

// The TensorBoard profiler plugin's own tests, checked against ptscope:
// testdata/peers/tbplugin holds the traces they read and asserts.jsonl.gz the
// values they assert (scripts/peers/tbplugin_asserts.py extracted both from
// the plugin's sources; testdata/peers/README.md names them). Every value
// must come out equal, at the precision the plugin gives it, or be listed
// in docs/trace.md ("Differences from the plugin's tests") with the
// definition that differs; a listed difference that no longer differs
// fails too, so the list stays true.

const peersDir = "../../testdata/peers"

// peerAssert is one line of asserts.jsonl.gz.
type peerAssert struct {
	Src    string   `json:"src"`
	Test   string   `json:"test"`
	Traces []string `json:"traces"`
	Worker string   `json:"worker"`
	Q      string   `json:"q"`
	Key    []string `json:"key"`
	Field  string   `json:"field"`
	Want   any      `json:"want"`
	Tol    float64  `json:"tol"`
}

func (a peerAssert) String() string {
	return fmt.Sprintf("%s %s %s[%s].%s", a.Src, a.Test, a.Q, strings.Join(a.Key, " | "), a.Field)
}

// errNotComputed marks a value ptscope has no equivalent for.
var errNotComputed = errors.New("not computed")

// peerRun is ptscope's analysis of one assert's traces.
type peerRun struct {
	rep     *Report // the traces compared as ranks
	byShape *Report // the same with operators grouped by input shapes
}

func TestConformanceTBPlugin(t *testing.T) {
	asserts := readPeerAsserts(t, filepath.Join(peersDir, "tbplugin", "asserts.jsonl.gz"))
	diffs := readDifferences(t, "../../docs/trace.md")
	runs := map[string]*peerRun{}
	var matched, total int
	used := make([]int, len(diffs))
	byQ := map[string][2]int{}
	for _, a := range asserts {
		key := strings.Join(a.Traces, "\n")
		run := runs[key]
		if run == nil {
			run = analysePeer(t, a.Traces)
			runs[key] = run
		}
		total++
		got, err := peerValue(run, a)
		ok := err == nil && peerEqual(got, a.Want, a.Tol)
		c := byQ[a.Q]
		c[1]++
		if ok {
			matched++
			c[0]++
			byQ[a.Q] = c
			continue
		}
		byQ[a.Q] = c
		if err != nil {
			got = err.Error()
		}
		k := matchDifference(diffs, a)
		if k < 0 {
			t.Errorf("%s: ptscope %v, plugin %v (not listed in docs/trace.md)", a, got, a.Want)
			continue
		}
		used[k]++
	}
	for k, d := range diffs {
		if used[k] == 0 {
			t.Errorf("docs/trace.md lists %s in %s as a difference, but every such value matches", strings.Join(d.quantity, ", "), d.test)
		}
	}
	qs := make([]string, 0, len(byQ))
	for q := range byQ {
		qs = append(qs, q)
	}
	sort.Strings(qs)
	for _, q := range qs {
		t.Logf("%-16s %4d of %4d", q, byQ[q][0], byQ[q][1])
	}
	t.Logf("conformance: %d of %d asserted values match", matched, total)
}

func readPeerAsserts(t *testing.T, name string) []peerAssert {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var out []peerAssert
	sc := bufio.NewScanner(zr)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var a peerAssert
		d := json.NewDecoder(strings.NewReader(sc.Text()))
		d.UseNumber()
		if err := d.Decode(&a); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out = append(out, a)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("%s: no asserted values", name)
	}
	return out
}

// difference is one row of docs/trace.md's list of differences.
type difference struct {
	quantity []string // q.field globs
	test     string   // test name glob
}

// readDifferences reads the table that follows the marker
// "<!-- conformance-differences -->" in the doc.
func readDifferences(t *testing.T, name string) []difference {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "<!-- conformance-differences -->")
	if !ok {
		t.Fatalf("%s: no conformance-differences marker", name)
	}
	var out []difference
	for _, line := range strings.Split(rest, "\n")[1:] {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			if len(out) > 0 || line != "" {
				break
			}
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) < 5 {
			t.Fatalf("%s: a difference row needs 5 cells: %s", name, line)
		}
		q := strings.Trim(strings.TrimSpace(cells[0]), "`")
		if q == "quantity" || strings.HasPrefix(q, "---") {
			continue
		}
		d := difference{test: strings.Trim(strings.TrimSpace(cells[1]), "`")}
		for _, x := range strings.Split(cells[0], ",") {
			d.quantity = append(d.quantity, strings.Trim(strings.TrimSpace(x), "`"))
		}
		out = append(out, d)
	}
	return out
}

func matchDifference(diffs []difference, a peerAssert) int {
	for k, d := range diffs {
		if ok, _ := path.Match(d.test, a.Test); !ok {
			continue
		}
		for _, q := range d.quantity {
			if ok, _ := path.Match(q, a.Q+"."+a.Field); ok {
				return k
			}
		}
	}
	return -1
}

func analysePeer(t *testing.T, traces []string) *peerRun {
	t.Helper()
	read := func() []*kineto.Trace {
		var ts []*kineto.Trace
		for _, p := range traces {
			tr, err := kineto.ReadFile(context.Background(), filepath.Join(peersDir, "tbplugin", p), kineto.Options{})
			if err != nil {
				t.Fatal(err)
			}
			ts = append(ts, tr)
		}
		return ts
	}
	return &peerRun{rep: AnalyzeTraces(read(), Options{}), byShape: AnalyzeTraces(read(), Options{GroupByShape: true})}
}

// rank is the analysis of the assert's worker: workerN is the N-th trace.
func (r *peerRun) rank(rep *Report, a peerAssert) *Rank {
	n, _ := strconv.Atoi(strings.TrimPrefix(a.Worker, "worker"))
	if len(rep.Ranks) == 1 {
		return &rep.Ranks[0]
	}
	for i := range rep.Ranks {
		if filepath.Base(rep.Ranks[i].Path) == filepath.Base(a.Traces[n]) {
			return &rep.Ranks[i]
		}
	}
	return nil
}

func usOf(ns int64) float64 { return float64(ns) / 1000 }

// peerValue is ptscope's value of an asserted quantity.
func peerValue(run *peerRun, a peerAssert) (any, error) {
	r := run.rank(run.rep, a)
	if r == nil {
		return nil, fmt.Errorf("no rank for %s", a.Worker)
	}
	switch a.Q {
	case "step":
		return stepValue(r, a)
	case "avg":
		if a.Field == "total" {
			return usOf(r.AverageStepNS), nil
		}
		return breakdownValue(r.AverageBreakdown, a.Field)
	case "op":
		o := findOp(r.Operators, a.Key[0], "")
		if a.Field == "input_shape" {
			// the shapes of its calls, when they are all one
			var shapes []string
			for _, x := range run.rank(run.byShape, a).Operators {
				if x.Name == a.Key[0] {
					shapes = append(shapes, x.InputShapes)
				}
			}
			if len(shapes) != 1 {
				return nil, fmt.Errorf("%d input shapes", len(shapes))
			}
			return normShape(shapes[0]), nil
		}
		return opValue(o, a.Field)
	case "op_shape":
		return opValue(findOp(run.rank(run.byShape, a).Operators, a.Key[0], a.Key[1]), a.Field)
	case "kernel":
		return kernelValue(r, a)
	case "kernel_op":
		return kernelOpValue(r, a)
	case "gpu":
		return gpuValue(r, a)
	case "rank":
		if a.Field == "tensor_core_eligible_ratio" {
			return r.TensorCoreEligibleRatio, nil
		}
	case "count":
		return countValue(run, r, a)
	case "flag":
		return flagValue(r, a.Field)
	case "recommendation":
		switch a.Key[0] {
		case "dataloader":
			return r.DataLoaderRatio, nil
		case "tensor_core_eligible":
			return r.TensorCoreEligibleRatio, nil
		}
	case "mem":
		return memValue(r, a)
	case "comm":
		return commValue(r, a)
	case "dist_overlap":
		st, err := stepAt(r, a.Key[0])
		if err != nil {
			return nil, err
		}
		o := st.Overlap
		return usOf(map[string]int64{"computation_only": o.ComputeOnlyNS, "overlap": o.OverlapNS,
			"communication_only": o.CommunicationOnlyNS, "other": o.OtherNS}[a.Field]), nil
	case "dist_wait":
		return distWait(run, r, a)
	case "util":
		return utilValue(r, a)
	case "memstat":
		return memStatValue(r, a)
	case "sm_ranges", "module":
		return nil, errNotComputed
	case "op_prefix":
		for _, o := range r.Operators {
			if strings.HasPrefix(o.Name, a.Key[0]) {
				return true, nil
			}
		}
		return false, nil
	case "dataloader_range":
		// the DataPipe's span [100, 123] us is DataLoader time
		var dl int64
		for _, st := range r.Steps {
			dl += st.Breakdown.DataLoaderNS
		}
		return dl >= 23_000, nil
	}
	return nil, fmt.Errorf("unknown quantity %s.%s", a.Q, a.Field)
}

// stepAt finds a step by "#N" (its number) or index.
func stepAt(r *Rank, key string) (*Step, error) {
	if n, ok := strings.CutPrefix(key, "#"); ok {
		for i := range r.Steps {
			if strconv.Itoa(r.Steps[i].Number) == n {
				return &r.Steps[i], nil
			}
		}
	} else if k, err := strconv.Atoi(key); err == nil && k < len(r.Steps) {
		return &r.Steps[k], nil
	}
	return nil, fmt.Errorf("no step %s of %d", key, len(r.Steps))
}

func stepValue(r *Rank, a peerAssert) (any, error) {
	st, err := stepAt(r, a.Key[0])
	if err != nil {
		return nil, err
	}
	if a.Field == "total" {
		return usOf(st.DurationNS), nil
	}
	return breakdownValue(st.Breakdown, a.Field)
}

func breakdownValue(b Breakdown, field string) (any, error) {
	v, ok := map[string]int64{"kernel": b.KernelNS, "memcpy": b.MemcpyNS, "memset": b.MemsetNS,
		"communication": b.CommunicationNS, "runtime": b.RuntimeNS, "dataloader": b.DataLoaderNS,
		"cpu_exec": b.CPUExecNS, "other": b.OtherNS}[field]
	if !ok {
		return nil, fmt.Errorf("no breakdown part %s", field)
	}
	return usOf(v), nil
}

func findOp(ops []Operator, name, shape string) *Operator {
	for i := range ops {
		if ops[i].Name == name && normShape(ops[i].InputShapes) == normShape(shape) {
			return &ops[i]
		}
	}
	return nil
}

// normShape writes Input Dims as the plugin prints them: "[[2, 8, 5], []]".
func normShape(s string) string {
	s = strings.ReplaceAll(s, " ", "")
	return strings.ReplaceAll(s, ",", ", ")
}

func opValue(o *Operator, field string) (any, error) {
	if o == nil {
		return nil, errors.New("no such operator row")
	}
	switch field {
	case "calls":
		return o.Calls, nil
	case "host_total_us":
		return usOf(o.HostTotalNS), nil
	case "host_self_us":
		return usOf(o.HostSelfNS), nil
	case "device_total_us":
		return usOf(o.DeviceTotalNS), nil
	case "device_self_us":
		return usOf(o.DeviceSelfNS), nil
	case "tc_eligible":
		return o.TensorCoreEligible, nil
	case "tc_self_ratio":
		return share(o.TensorCoreSelfNS, o.DeviceSelfNS), nil
	case "tc_total_ratio":
		return share(o.TensorCoreTotalNS, o.DeviceTotalNS), nil
	case "input_shape":
		return normShape(o.InputShapes), nil
	}
	return nil, fmt.Errorf("no operator field %s", field)
}

func kernelValue(r *Rank, a peerAssert) (any, error) {
	var k *Kernel
	for i := range r.Kernels {
		if r.Kernels[i].Name == a.Key[0] {
			k = &r.Kernels[i]
		}
	}
	if k == nil {
		return nil, errors.New("no such kernel row")
	}
	switch a.Field {
	case "calls":
		return k.Calls, nil
	case "total_us":
		return usOf(k.TotalNS), nil
	case "mean_us":
		return usOf(k.TotalNS) / float64(k.Calls), nil
	case "min_us":
		return usOf(k.MinNS), nil
	case "max_us":
		return usOf(k.MaxNS), nil
	case "mean_blocks_per_sm":
		return k.MeanBlocksPerSM, nil
	case "mean_occupancy":
		return k.MeanOccupancyRatio, nil
	case "tc_used":
		return k.TensorCore, nil
	}
	return nil, fmt.Errorf("no kernel field %s", a.Field)
}

// kernelOpValue reads the kernel-by-operator table; the key is name,
// operator, grid, block, registers and shared memory as the plugin prints
// them ("" when absent).
func kernelOpValue(r *Rank, a peerAssert) (any, error) {
	dims := func(v [3]int32) string {
		if v == ([3]int32{}) {
			return ""
		}
		return fmt.Sprintf("[%d, %d, %d]", v[0], v[1], v[2])
	}
	// the plugin's row key reads absent registers and shared memory as 0
	want := slices.Clone(a.Key)
	for i := 4; i < len(want); i++ {
		if want[i] == "" {
			want[i] = "0"
		}
	}
	var k *KernelOp
	for i := range r.KernelOps {
		x := &r.KernelOps[i]
		key := []string{x.Name, x.Operator, dims(x.Grid), dims(x.Block), strconv.Itoa(int(x.RegistersPerThread)),
			strconv.Itoa(int(x.SharedMemoryBytes))}
		if slices.Equal(key, want) {
			k = x
		}
	}
	if k == nil {
		return nil, errors.New("no such kernel_op row")
	}
	switch a.Field {
	case "name":
		return k.Name, nil
	case "op_name":
		return k.Operator, nil
	case "grid":
		return dims(k.Grid), nil
	case "block":
		return dims(k.Block), nil
	case "registers":
		return k.RegistersPerThread, nil
	case "shared_memory":
		return k.SharedMemoryBytes, nil
	case "calls":
		return k.Calls, nil
	case "total_us":
		return usOf(k.TotalNS), nil
	case "mean_us":
		return usOf(k.TotalNS) / float64(k.Calls), nil
	case "min_us":
		return usOf(k.MinNS), nil
	case "max_us":
		return usOf(k.MaxNS), nil
	case "mean_blocks_per_sm":
		return k.MeanBlocksPerSM, nil
	case "mean_occupancy":
		return k.MeanOccupancyRatio, nil
	case "tc_used":
		return k.TensorCore, nil
	case "op_tc_eligible":
		return k.OperatorTensorCoreEligible, nil
	}
	return nil, fmt.Errorf("no kernel_op field %s", a.Field)
}

// utilValue reads the utilisation timeline: bucket k of the device, and
// after the last bucket the plugin's closing point (its end, 0).
func utilValue(r *Rank, a peerAssert) (any, error) {
	d, err := strconv.Atoi(a.Key[0])
	if err != nil {
		return nil, err
	}
	k, err := strconv.Atoi(a.Key[1])
	if err != nil {
		return nil, err
	}
	var pts []UtilPoint
	for _, p := range r.UtilTimeline {
		if p.Device == d {
			pts = append(pts, p)
		}
	}
	switch {
	case k < len(pts) && a.Field == "time_us":
		return usOf(pts[k].StartTimeNS), nil
	case k < len(pts):
		return pts[k].UtilizationRatio, nil
	case k == len(pts) && k > 0 && a.Field == "time_us":
		return usOf(pts[k-1].StartTimeNS + pts[k-1].DurationNS), nil
	case k == len(pts) && k > 0:
		return 0.0, nil
	}
	return nil, fmt.Errorf("no bucket %d of %d", k, len(pts))
}

// distWait reads a step's wait and transfer for the rank from the
// cross-rank comparison.
func distWait(run *peerRun, r *Rank, a peerAssert) (any, error) {
	st, err := stepAt(r, a.Key[0])
	if err != nil {
		return nil, err
	}
	c := run.rep.CrossRank
	if c == nil {
		return nil, errors.New("no cross-rank comparison")
	}
	k := slices.IndexFunc(run.rep.Ranks, func(x Rank) bool { return x.Rank == r.Rank })
	for _, s := range c.Steps {
		if s.Name == st.Name {
			if a.Field == "wait_us" {
				return usOf(s.WaitNS[k]), nil
			}
			return usOf(s.TransferNS[k]), nil
		}
	}
	return nil, errors.New("no such step across ranks")
}

// commValue reads the communication operators table (the plugin's: per
// nccl:*/gloo:* op name; its means rounded to whole us, as the plugin's).
func commValue(r *Rank, a peerAssert) (any, error) {
	var c *CommOp
	for i := range r.CommOps {
		if r.CommOps[i].Name == a.Key[0] {
			c = &r.CommOps[i]
		}
	}
	if c == nil {
		return nil, errors.New("no such communication op")
	}
	switch a.Field {
	case "calls":
		return c.Calls, nil
	case "total_bytes":
		return c.Bytes, nil
	case "mean_bytes":
		return c.MeanBytes, nil
	case "total_latency_us":
		return c.LatencyNS / 1000, nil
	case "mean_latency_us":
		return (c.MeanLatencyNS + 500) / 1000, nil
	case "total_transfer_us":
		return c.TransferNS / 1000, nil
	case "mean_transfer_us":
		return (c.MeanTransferNS + 500) / 1000, nil
	}
	return nil, fmt.Errorf("no communication field %s", a.Field)
}

func gpuValue(r *Rank, a peerAssert) (any, error) {
	d, err := strconv.Atoi(a.Key[0])
	if err != nil {
		return nil, err
	}
	var g *GPU
	for i := range r.GPUs {
		if r.GPUs[i].Device == d {
			g = &r.GPUs[i]
		}
	}
	if g == nil {
		return nil, fmt.Errorf("no GPU %d", d)
	}
	switch a.Field {
	case "utilization":
		return g.UtilizationRatio, nil
	case "sm_efficiency":
		return g.SMEfficiencyRatio, nil
	case "occupancy":
		return g.AchievedOccupancyRatio, nil
	case "tensor_core":
		return g.TensorCoreRatio, nil
	case "name":
		return g.Name, nil
	case "memory_gb":
		return float64(g.MemoryBytes) / (1 << 30), nil
	case "compute_capability":
		return g.ComputeCapability, nil
	}
	return nil, fmt.Errorf("no GPU field %s", a.Field)
}

func countValue(run *peerRun, r *Rank, a peerAssert) (any, error) {
	switch a.Field {
	case "steps":
		return len(r.Steps), nil
	case "ops":
		return len(r.Operators), nil
	case "op_shapes":
		return len(run.rank(run.byShape, a).Operators), nil
	case "kernels":
		return len(r.Kernels), nil
	case "gpus":
		return len(r.GPUs), nil
	case "memory_devices":
		return len(r.Memory.Devices), nil
	case "comm_ops":
		n := 0
		for _, c := range r.Comm.Collectives {
			n += c.Calls
		}
		return n, nil
	case "kernel_ops":
		return len(r.KernelOps), nil
	}
	return nil, fmt.Errorf("no count %s", a.Field)
}

func flagValue(r *Rank, field string) (any, error) {
	switch field {
	case "has_runtime":
		for _, st := range r.Steps {
			if st.Breakdown.RuntimeNS > 0 {
				return true, nil
			}
		}
		return false, nil
	case "has_kernel":
		return len(r.Kernels) > 0, nil
	case "has_memcpy_or_memset":
		return len(r.Copies) > 0, nil
	case "has_communication":
		return len(r.Comm.Collectives) > 0, nil
	}
	return nil, fmt.Errorf("no flag %s", field)
}

// memStatValue reads the memory table by device and operator.
func memStatValue(r *Rank, a peerAssert) (any, error) {
	for _, m := range r.MemoryOps {
		if m.Device != a.Key[0] || m.Operator != a.Key[1] {
			continue
		}
		switch a.Field {
		case "self_increase_bytes":
			return m.SelfIncreaseBytes, nil
		case "self_allocation_bytes":
			return m.SelfAllocatedBytes, nil
		case "self_allocations":
			return m.SelfAllocations, nil
		case "increase_bytes":
			return m.IncreaseBytes, nil
		case "allocation_bytes":
			return m.AllocatedBytes, nil
		case "allocations":
			return m.Allocations, nil
		case "calls":
			return m.Calls, nil
		}
		return nil, fmt.Errorf("no memory statistic %s", a.Field)
	}
	return nil, errors.New("no such memory row")
}

// memValue reads the memory curve: points per device ("point", i), the
// plugin's step plot (each point, then the next point's time with this
// point's values), the profiler's start.
func memValue(r *Rank, a peerAssert) (any, error) {
	if a.Key[0] == "start" {
		return usOf(r.StartTimeNS), nil
	}
	var d *MemoryDevice
	for i := range r.Memory.Devices {
		if r.Memory.Devices[i].Device == a.Key[0] {
			d = &r.Memory.Devices[i]
		}
	}
	if d == nil {
		return nil, fmt.Errorf("no memory device %s", a.Key[0])
	}
	c := d.Curve
	if a.Field == "count" {
		if a.Key[1] == "step_plot" {
			return 2*len(c) - 1, nil
		}
		return len(c), nil
	}
	i, err := strconv.Atoi(a.Key[2])
	if err != nil {
		return nil, err
	}
	p, tp := i, i
	if a.Key[1] == "step_plot" {
		p, tp = i/2, i/2+i%2
	}
	if p >= len(c) || tp >= len(c) {
		return nil, fmt.Errorf("point %d of %d", i, len(c))
	}
	switch a.Field {
	case "time_us":
		return usOf(c[tp].TimeNS - r.StartTimeNS), nil
	case "allocated":
		return c[p].AllocatedBytes, nil
	case "reserved":
		return c[p].ReservedBytes, nil
	}
	return nil, fmt.Errorf("no memory field %s", a.Field)
}

// peerEqual compares at the plugin's precision: numbers within tol,
// everything else exactly.
func peerEqual(got, want any, tol float64) bool {
	if n, ok := want.(json.Number); ok {
		w, err := n.Float64()
		if err != nil {
			return false
		}
		var g float64
		switch v := got.(type) {
		case int:
			g = float64(v)
		case int64:
			g = float64(v)
		case float64:
			g = v
		default:
			return false
		}
		return math.Abs(g-w) <= tol+1e-6*math.Abs(w) // float32 kernel arguments
	}
	if want == nil {
		return got == nil
	}
	return fmt.Sprint(got) == fmt.Sprint(want)
}
