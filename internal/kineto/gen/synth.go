package gen

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Comm is the communication pattern of a synthetic rank.
type Comm uint8

// Communication patterns.
const (
	CommNone Comm = iota
	// CommDDP: an all-reduce per bucket of layers during the backward pass.
	CommDDP
	// CommFSDP: an all-gather before each layer's forward and backward, and
	// a reduce-scatter after each layer's backward; compute waits for the
	// all-gathers.
	CommFSDP
)

// Scenario describes one rank of a synthetic training run that Write emits
// as a Kineto trace in Kineto's own layout: a main thread (DataLoader,
// forward ops, optimizer), an autograd thread (backward ops), a compute
// stream and an NCCL stream, with External ids, correlations, sequence
// numbers and, optionally, [memory] events. Every time is derived from the
// fields, so the same scenario always gives the same bytes.
type Scenario struct {
	Rank, WorldSize int
	Backend         string // distributedInfo.backend; "" writes no distributedInfo
	Steps           int
	FirstStep       int  // N of the first ProfilerStep#N
	ProfilerSteps   bool // wrap each step in ProfilerStep#N (prof.step()); else only Optimizer.step marks steps
	Layers          int
	KernelNS        int64 // each forward compute kernel; backward kernels take twice as long
	OpNS            int64 // host time of each op (launch overhead included)
	DataLoaderNS    int64 // DataLoader __next__ per step, before the forward
	OptimizerNS     int64 // the optimizer's kernel per step
	Comm            Comm
	CommNS          int64 // each collective's kernel
	DDPForward      bool  // a DistributedDataParallel.forward annotation around the forward
	// Gloo runs the collectives through gloo (host ops "gloo:*", no NCCL
	// kernel); it is implied by Backend "gloo".
	Gloo         bool
	Memory       bool // [memory] events (profile_memory)
	WithStack    bool // metadata only
	RecordShapes bool // metadata only
	// SlowSteps adds host time to the DataLoader of the given steps (index
	// from 0), for outliers.
	SlowSteps map[int]int64
}

// ScenarioTimeBase is the baseTimeNanoseconds of synthetic traces
// (2026-09-29, Unix ns); their ts start at 1,000 s after it.
const ScenarioTimeBase = int64(1_790_000_000) * 1_000_000_000

// Write writes the scenario's trace (plain JSON).
func (s Scenario) Write(w io.Writer) (Stats, error) {
	bw := bufio.NewWriterSize(w, 1<<16)
	cw := &countWriter{w: bw}
	g := &synth{s: s, bw: cw}
	g.run()
	g.st.Bytes = cw.n
	if err := bw.Flush(); err != nil {
		return g.st, err
	}
	if g.err == nil {
		g.err = cw.err
	}
	return g.st, g.err
}

const (
	synthPID     = 4242
	mainTID      = 4242
	autogradTID  = 4250
	computeStrm  = 7
	ncclStrm     = 20
	synthT0      = int64(1_000_000_000_000) // ns after the base
	launchDelay  = 4_000                    // launch call -> earliest kernel start
	tensorKernel = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"
)

type synth struct {
	s                    Scenario
	bw                   *countWriter
	st                   Stats
	err                  error
	n                    int
	ext, corr, seq, coll int64
	computeFree, ncclEnd int64
	allocated            int64
}

func (g *synth) emit(ev string) {
	if g.err != nil {
		return
	}
	if g.n > 0 {
		io.WriteString(g.bw, ",\n")
	}
	_, g.err = io.WriteString(g.bw, "  "+ev)
	g.n++
	g.st.Events++
}

func us(ns int64) string { return string(appendMicros(nil, ns)) }

func (g *synth) x(cat, name string, tid int, ts, dur int64, args string) {
	ev := fmt.Sprintf(`{"ph": "X", "cat": "%s", "name": "%s", "pid": %d, "tid": %d, "ts": %s, "dur": %s`, cat, name, synthPID, tid, us(ts), us(dur))
	if args != "" {
		ev += `, "args": {` + args + `}`
	}
	g.emit(ev + "}")
}

// op writes a cpu_op (or annotation) with a fresh External id and returns it.
func (g *synth) op(cat, name string, tid int, ts, dur int64, extra string) int64 {
	g.ext++
	args := fmt.Sprintf(`"External id": %d, "Record function id": 0, "Ev Idx": %d`, g.ext, g.n)
	if extra != "" {
		args += ", " + extra
	}
	g.x(cat, name, tid, ts, dur, args)
	return g.ext
}

// kernel launches a kernel from an op (External id ext) at host time ts on
// stream, starting no earlier than after; it returns the kernel's end.
func (g *synth) kernel(ext int64, tid int, ts int64, name string, stream int, after, dur int64, comm string) int64 {
	g.corr++
	g.x("cuda_runtime", "cudaLaunchKernel", tid, ts, 3_000, fmt.Sprintf(`"External id": %d, "cbid": 211, "correlation": %d`, ext, g.corr))
	start := max(ts+launchDelay, after)
	args := fmt.Sprintf(`"External id": %d, "queued": 0, "device": 0, "context": 1, "stream": %d, "correlation": %d, "registers per thread": 128, "shared memory": 0, "blocks per SM": 1.2, "warps per SM": 9.7, "grid": [160, 1, 1], "block": [256, 1, 1], "est. achieved occupancy %%": 45`,
		ext, stream, g.corr)
	if comm != "" {
		args += ", " + comm
	}
	ev := fmt.Sprintf(`{"ph": "X", "cat": "kernel", "name": "%s", "pid": 0, "tid": %d, "ts": %s, "dur": %s, "args": {%s}}`, name, stream, us(start), us(dur), args)
	g.emit(ev)
	return start + dur
}

// collective writes record_param_comms and its NCCL kernel; the kernel
// starts after `after` and after the previous collective. With gloo it is
// a host op that takes CommNS.
func (g *synth) collective(tid int, ts int64, coll, kname string, after int64) int64 {
	g.coll++
	if g.gloo() {
		g.op("user_annotation", "gloo:"+coll, tid, ts, g.s.CommNS, "")
		return ts + g.s.CommNS
	}
	args := fmt.Sprintf(`"Collective name": "%s", "dtype": "BFloat16", "In msg nelems": 4194304, "Out msg nelems": 4194304, "Group size": %d, "Process Group Name": "0", "Process Group Description": "default_pg", "Seq": %d`,
		coll, max(g.s.WorldSize, 1), g.coll)
	ext := g.op("cpu_op", "record_param_comms", tid, ts, g.s.OpNS, args)
	end := g.kernel(ext, tid, ts+g.s.OpNS/4, kname, ncclStrm, max(after, g.ncclEnd), g.s.CommNS, args)
	g.ncclEnd = end
	return end
}

func (g *synth) gloo() bool { return g.s.Gloo || g.s.Backend == "gloo" }

func (g *synth) memory(ts, delta int64) {
	if !g.s.Memory {
		return
	}
	g.allocated += delta
	g.emit(fmt.Sprintf(`{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": %d, "tid": %d, "ts": %s, "args": {"Total Reserved": %d, "Total Allocated": %d, "Bytes": %d, "Addr": %d, "Device Id": 0, "Device Type": 1, "Ev Idx": %d}}`,
		synthPID, mainTID, us(ts), ((g.allocated>>30)+1)<<30, g.allocated, delta, 140000000000+ts%1000000, g.n))
}

func (g *synth) header() {
	s := g.s
	var b strings.Builder
	b.WriteString("{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [\n    {\n")
	b.WriteString(`      "id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85017493504, "computeMajor": 9, "computeMinor": 0, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536, "warpSize": 32, "sharedMemPerBlock": 49152, "numSms": 132`)
	b.WriteString("\n    }\n  ],\n")
	if s.WithStack {
		b.WriteString("  \"with_stack\": 1,\n")
	}
	if s.Memory {
		b.WriteString("  \"profile_memory\": 1,\n")
	}
	if s.RecordShapes {
		b.WriteString("  \"record_shapes\": 1,\n")
	}
	if s.Backend != "" {
		fmt.Fprintf(&b, "  \"distributedInfo\": {\"backend\": %q, \"rank\": %d, \"world_size\": %d},\n", s.Backend, s.Rank, s.WorldSize)
	}
	fmt.Fprintf(&b, "  \"displayTimeUnit\": \"ms\",\n  \"baseTimeNanoseconds\": %d,\n  \"traceEvents\": [\n", ScenarioTimeBase)
	io.WriteString(g.bw, b.String())
}

func (g *synth) run() {
	s := g.s
	g.header()
	g.emit(fmt.Sprintf(`{"name": "process_name", "ph": "M", "ts": 0.000, "pid": %d, "tid": 0, "args": {"name": "python3"}}`, synthPID))
	g.emit(fmt.Sprintf(`{"name": "thread_name", "ph": "M", "ts": 0.000, "pid": %d, "tid": %d, "args": {"name": "thread %d (python3)"}}`, synthPID, mainTID, mainTID))
	g.emit(fmt.Sprintf(`{"name": "thread_name", "ph": "M", "ts": 0.000, "pid": %d, "tid": %d, "args": {"name": "thread %d (pt_autograd_0)"}}`, synthPID, autogradTID, autogradTID))
	for _, st := range []int{computeStrm, ncclStrm} {
		g.emit(fmt.Sprintf(`{"name": "thread_name", "ph": "M", "ts": 0.000, "pid": 0, "tid": %d, "args": {"name": "stream %d "}}`, st, st))
	}
	h := synthT0
	layerMem := int64(96 << 20)
	g.memory(h, 2<<30)
	for k := 0; k < s.Steps; k++ {
		stepStart := h
		// DataLoader
		if dl := s.DataLoaderNS + s.SlowSteps[k]; dl > 0 {
			g.op("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", mainTID, h, dl, "")
			h += dl
		}
		// forward
		fwdStart := h
		var gathered []int64
		if s.Comm == CommFSDP {
			// the all-gathers are issued ahead, each after the previous
			for l := 0; l < s.Layers; l++ {
				gathered = append(gathered, g.collective(mainTID, h, "_allgather_base", "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 0))
				h += s.OpNS
			}
		}
		for l := 0; l < s.Layers; l++ {
			g.seq++
			ext := g.op("cpu_op", "aten::linear", mainTID, h, s.OpNS, fmt.Sprintf(`"Sequence number": %d, "Fwd thread id": 0`, g.seq))
			after := g.computeFree
			if s.Comm == CommFSDP {
				after = max(after, gathered[l])
			}
			g.computeFree = g.kernel(ext, mainTID, h+s.OpNS/4, tensorKernel, computeStrm, after, s.KernelNS, "")
			g.memory(h+s.OpNS/2, layerMem)
			h += s.OpNS
		}
		if s.DDPForward {
			g.op("user_annotation", "DistributedDataParallel.forward", mainTID, fwdStart, h-fwdStart, "")
		}
		// backward, on the autograd thread; the main thread waits
		t := h
		for l := s.Layers - 1; l >= 0; l-- {
			seq := g.seq - int64(s.Layers-1-l)
			var after int64
			if s.Comm == CommFSDP {
				after = g.collective(autogradTID, t, "_allgather_base", "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 0)
				t += s.OpNS
			}
			g.op("cpu_op", "autograd::engine::evaluate_function: MmBackward0", autogradTID, t, 2*s.OpNS, fmt.Sprintf(`"Sequence number": %d, "Fwd thread id": 1`, seq))
			ext := g.op("cpu_op", "MmBackward0", autogradTID, t+s.OpNS/8, 2*s.OpNS-s.OpNS/4, fmt.Sprintf(`"Sequence number": %d, "Fwd thread id": 1`, seq))
			g.computeFree = g.kernel(ext, autogradTID, t+s.OpNS/4, tensorKernel, computeStrm, max(g.computeFree, after), 2*s.KernelNS, "")
			g.memory(t+s.OpNS, -layerMem)
			t += 2 * s.OpNS
			switch {
			case s.Comm == CommFSDP:
				g.collective(autogradTID, t, "_reduce_scatter_base", "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", g.computeFree)
				t += s.OpNS
			case s.Comm == CommDDP && s.WorldSize > 1 && (l%2 == 0):
				end := g.collective(autogradTID, t, "allreduce", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", g.computeFree)
				if g.gloo() {
					t = end // gloo blocks the host
				} else {
					t += s.OpNS
				}
			}
		}
		h = t + s.OpNS
		// optimizer: its kernel waits for the gradients' communication
		opt := g.op("user_annotation", "Optimizer.step#AdamW.step", mainTID, h, 3*s.OpNS, "")
		_ = opt
		ext := g.op("cpu_op", "aten::_foreach_add_", mainTID, h+s.OpNS/2, s.OpNS, "")
		g.computeFree = g.kernel(ext, mainTID, h+s.OpNS, "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<2>>(...)",
			computeStrm, max(g.computeFree, g.ncclEnd), s.OptimizerNS, "")
		h += 3 * s.OpNS
		g.op("user_annotation", "Optimizer.zero_grad#AdamW.zero_grad", mainTID, h, s.OpNS/2, "")
		h += s.OpNS / 2
		if s.ProfilerSteps {
			g.op("user_annotation", "ProfilerStep#"+strconv.Itoa(s.FirstStep+k), mainTID, stepStart, h-stepStart, "")
		}
		// the next step's host work waits for this one's GPU work (the
		// loss's .item() synchronises)
		h = max(h, g.computeFree, g.ncclEnd) + s.OpNS
	}
	g.emit(`{"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "", "ts": ` + us(h) + `}`)
	if g.err == nil {
		_, g.err = io.WriteString(g.bw, "\n  ],\n  \"traceName\": \"synthetic\"\n}\n")
		g.st.Copies = s.Steps
	}
}

// Scenarios are the named scenarios of gentrace -scenario and of the
// committed test traces (testdata/traces), for rank r.
func Scenarios(r int) map[string]Scenario {
	// rank 1 of the FSDP pair loads its data ten times slower: it joins
	// every collective last
	fsdpData := int64(300_000)
	if r == 1 {
		fsdpData = 3_000_000
	}
	return map[string]Scenario{
		// an FSDP rank whose NCCL kernels run most of the time: compute
		// waits for the all-gathers
		"fsdp": {Rank: r, WorldSize: 2, Backend: "nccl", Steps: 6, FirstStep: 10, ProfilerSteps: true, Layers: 8,
			KernelNS: 150_000, OpNS: 30_000, DataLoaderNS: fsdpData, OptimizerNS: 400_000, Comm: CommFSDP, CommNS: 420_000,
			Memory: true, RecordShapes: true},
		// DDP at world size 1 with the NCCL backend (no NCCL kernel runs),
		// recorded without prof.step(): three Optimizer.step annotations
		"ddp1": {Rank: r, WorldSize: 1, Backend: "nccl", Steps: 3, Layers: 6, KernelNS: 200_000, OpNS: 25_000,
			OptimizerNS: 300_000, Comm: CommDDP, DDPForward: true},
		// a single GPU waiting for a slow DataLoader, one step much slower
		"dataloader": {Rank: r, Steps: 12, FirstStep: 1, ProfilerSteps: true, Layers: 6, KernelNS: 300_000, OpNS: 25_000,
			DataLoaderNS: 2_000_000, OptimizerNS: 500_000, Memory: true, RecordShapes: true, SlowSteps: map[int]int64{7: 12_000_000}},
	}
}
