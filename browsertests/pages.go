package browsertests

import (
	"fmt"
	"time"
)

// PlotMiddle is the page position of the middle of the memory timeline's
// plot.
func PlotMiddle(b *Browser) (x, y float64, err error) {
	r, err := Eval[[]float64](b, `(() => { const r = window.__ptscope.memory.plotRect(); return [r.left + r.width / 2, r.top + r.height / 2]; })()`)
	if err != nil {
		return 0, 0, err
	}
	return r[0], r[1], nil
}

// ClickMiddleBlock clicks the middle of the memory timeline's plot and
// waits for the block panel.
func ClickMiddleBlock(b *Browser) error {
	x, y, err := PlotMiddle(b)
	if err != nil {
		return err
	}
	if _, err := Eval[bool](b, `(() => { const p = document.querySelector('[data-testid=block-details]'); p.dataset.state = 'waiting'; return true; })()`); err != nil {
		return err
	}
	if err := b.Click(x, y); err != nil {
		return err
	}
	return b.Ready("block-details", 10*time.Second)
}

// BlockAt finds a drawn block of the memory timeline: the one alive at
// entry e (allocated there, with allocated set) whose drawn size is
// nearest size bytes (size 0: the widest).
// It returns the page position of its middle at that entry and its drawn
// size in bytes.
func BlockAt(b *Browser, e, size int64, allocated bool) (x, y, drawn float64, err error) {
	v, err := Eval[[]float64](b, fmt.Sprintf(`(() => {
  const tl = window.__ptscope.memory, d = tl.data, r = tl.canvas.getBoundingClientRect(), e = %d, want = %d, allocated = %v;
  const ce = (c) => d.x0 + Math.floor(c * (d.x1 - d.x0) / d.cols);
  let best = null;
  for (const b of d.blocks) {
    if (e < ce(b.c0) || e >= ce(b.c1) || allocated && e >= ce(b.c0 + 1)) continue;
    let k = 0; for (let j = 0; j < b.cols.length; j++) if (ce(b.cols[j]) <= e) k = j;
    const cost = want ? Math.abs(b.size - want) : -(b.c1 - b.c0);
    if (!best || cost < best.cost) best = { cost, b, k };
  }
  if (!best) return [];
  const x = (Math.max(tl.X(e), tl.X(ce(best.b.c0))) + Math.min(tl.X(e + 1), tl.X(ce(best.b.c1)))) / 2;
  const y = (tl.Y(best.b.offs[best.k]) + tl.Y(best.b.offs[best.k] + best.b.size)) / 2;
  return [r.left + x, r.top + y, best.b.size];
})()`, e, size, allocated))
	if err != nil {
		return 0, 0, 0, err
	}
	if len(v) != 3 {
		return 0, 0, 0, fmt.Errorf("no block drawn at entry %d", e)
	}
	return v[0], v[1], v[2], nil
}
