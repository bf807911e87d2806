package perf

import "strings"

// nameClass is what the analyses ask of an event's name, found once per
// string id while the graph is built: the analyses then read it, from
// concurrent tasks, instead of matching strings for each event.
type nameClass uint16

const (
	ncOp          nameClass = 1 << iota // the op bits below are known
	ncGPU                               // the GPU bits below are known
	ncStep                              // ProfilerStep#N
	ncCommOp                            // nccl:* / gloo:* (isCommOpName)
	ncBackward                          // isBackwardName
	ncDataLoader                        // isDataLoader
	ncOptimizer                         // isOptimizer
	ncOptStep                           // Optimizer.step#...
	ncPtForward                         // ptscope:forward
	ncPtBackward                        // ptscope:backward
	ncPtOptimizer                       // ptscope:optimizer
	ncTCEligible                        // tcEligibleOps
	ncCommKernel                        // isCommKernelName (GPU)
	ncTC                                // IsTensorCoreKernel (GPU)
	ncAnnotation                        // isAnnotationName
)

// opClass classifies an op's name.
func opClass(name string) nameClass {
	c := ncOp
	set := func(b nameClass, v bool) {
		if v {
			c |= b
		}
	}
	set(ncStep, strings.HasPrefix(name, "ProfilerStep#"))
	set(ncCommOp, isCommOpName(name))
	set(ncBackward, isBackwardName(name))
	set(ncDataLoader, isDataLoader(name))
	set(ncOptimizer, isOptimizer(name))
	set(ncOptStep, strings.HasPrefix(name, "Optimizer.step#"))
	set(ncPtForward, name == "ptscope:forward")
	set(ncPtBackward, name == "ptscope:backward")
	set(ncPtOptimizer, name == "ptscope:optimizer")
	set(ncTCEligible, tcEligibleOps[name])
	set(ncAnnotation, isAnnotationName(name))
	return c
}

// isAnnotationName reports the names torch gives its own annotations
// (profiler steps, DataLoader, optimizer, DP/DDP forward): user_annotation
// events today, cpu_op ("Operator") in older traces, where the plugin
// still does not count them as operators (is_operator_node).
func isAnnotationName(name string) bool {
	return strings.HasPrefix(name, "ProfilerStep#") || isDataLoader(name) || strings.HasPrefix(name, "Optimizer.") ||
		name == "DataParallel.forward" || name == "DistributedDataParallel.forward"
}

// gpuClass classifies a GPU event's name.
func gpuClass(name string) nameClass {
	c := ncGPU
	if isCommKernelName(name) {
		c |= ncCommKernel
	}
	if IsTensorCoreKernel(name) {
		c |= ncTC
	}
	return c
}

// class is the class of event i's name (its op or GPU bits are known
// for ops and GPU events).
func (g *graph) class(i int32) nameClass { return g.names[g.ev.Name[i]] }
