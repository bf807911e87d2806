package snapgen

import (
	"fmt"
	"strings"
)

// JSONSnapshot writes a small valid JSON snapshot: one 2 MiB segment on
// device 0 and n alloc/free pairs of 512 B at times baseUS, baseUS+1, ...,
// each entry with frames (a JSON array). field, when not nil, may replace
// the JSON text of a key of entry i ("action", "addr", "size", "stream",
// "time_us") by returning it ("" keeps the value): the invalid-input
// tests of the reader and the attack suite build their cases with it.
func JSONSnapshot(n int, baseUS int64, frames string, field func(i int, key string) string) []byte {
	var b strings.Builder
	b.WriteString(`{"segments": [{"device": 0, "address": 1048576, "total_size": 2097152, "blocks": [{"size": 2097152, "state": "inactive"}]}], "device_traces": [[`)
	for i := 0; i < 2*n; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		act := "alloc"
		if i%2 == 1 {
			act = "free_completed"
		}
		vals := map[string]string{"action": `"` + act + `"`, "addr": fmt.Sprint(1048576 + 512*(i/2)), "size": "512",
			"stream": "0", "time_us": fmt.Sprint(baseUS + int64(i))}
		b.WriteString("{")
		for j, k := range []string{"action", "addr", "size", "stream", "time_us"} {
			v := vals[k]
			if field != nil {
				if r := field(i, k); r != "" {
					v = r
				}
			}
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%q: %s", k, v)
		}
		b.WriteString(`, "frames": ` + frames + `}`)
	}
	b.WriteString("]]}")
	return []byte(b.String())
}
