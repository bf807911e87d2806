package export

import (
	"testing"

	"github.com/ptscope/ptscope/internal/testfixture"
)

// TestSharedFixtures holds the exports to the bar on the real
// artifacts of ../shared/fixtures (skipped without them; the committed
// inputs cover the same code): the four exports of the GPT-2 small fp32
// training snapshot (pprof in-use total = the peak within 1% of torch's
// max_memory_allocated by go tool pprof, Perfetto counter tracks, memory_viz
// segments and device_traces with action/addr/size/frames, folded total =
// the peak) and the DataLoader trace cut to ProfilerStep#3, #2-#4 and
// #3-#4 (each step with all its kernels).
func TestSharedFixtures(t *testing.T) {
	m := fixtureMemory(t)
	checkPProf(t, m, gpt2TrainTorchPeak)
	checkPerfetto(t, m, gpt2TrainTorchPeak)
	checkMemVizWhole(t, m)
	checkFolded(t, m, gpt2TrainTorchPeak)
	checkTrimSteps(t, testfixture.Path(t, dataloaderTrace), 3, "#2, #3, #4")
	checkTrimKeepsSteps(t, testfixture.Path(t, dataloaderTrace), 2, 4)
	checkTrimKeepsSteps(t, testfixture.Path(t, dataloaderTrace), 3, 4)
}
