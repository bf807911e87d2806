package view

import (
	"net/url"
	"sort"
	"strconv"
)

// A view is one answer the page asks for, named by its API path under
// /api/v1/. Its build function is the only code that makes that answer:
// the server's route calls it with the request's query (Set.Answer;
// internal/web routes every entry of views), and the --html
// writer calls it with the queries it records (html.go), so that the page
// draws the same data from a server and from a file. docs/serve.md lists
// which view feeds which part of the page.
type view struct {
	kind  string // the input kind it reads: "snapshot" or "trace"
	build func(it *Input, p params) (any, error)
}

// views are the page's data, by API path: adding one here adds its
// route. (The input list and diff are routes of their own, Set.List and
// Set.Diff: an --html file carries its inputs, and has no second input to
// compare with.)
var views = map[string]view{
	"mem/summary":       {"snapshot", memSummary},
	"mem/view":          {"snapshot", memView},
	"mem/block":         {"snapshot", memBlock},
	"mem/hit":           {"snapshot", memHit},
	"mem/state":         {"snapshot", memState},
	"mem/event":         {"snapshot", memEvent},
	"mem/breakdown":     {"snapshot", memBreakdown},
	"mem/names":         {"snapshot", memNames},
	"trace/summary":     {"trace", traceSummary},
	"trace/view":        {"trace", traceView},
	"trace/event":       {"trace", traceEvent},
	"trace/memory":      {"trace", traceMemory},
	"trace/critical":    {"trace", traceCritical},
	"trace/gpu":         {"trace", traceGPU},
	"trace/distributed": {"trace", traceDistributed},
}

// viewNames lists the views in a stable order.
func viewNames() []string {
	out := make([]string, 0, len(views))
	for k := range views {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// params are a view's parameters: a request's URL query, or a query the
// --html writer records.
type params url.Values

func (p params) get(name string) string { return url.Values(p).Get(name) }

func (p params) has(name string) bool { return url.Values(p).Get(name) != "" }

// int reads an integer parameter; def is used when it is absent (required
// parameters pass required=true).
func (p params) int(name string, def int64, required bool) (int64, error) {
	v := p.get(name)
	if v == "" {
		if required {
			return 0, badRequest("missing parameter %s", name)
		}
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, badRequest("parameter %s=%q is not an integer", name, v)
	}
	return n, nil
}

// query builds params from name, value pairs.
func query(kv ...any) params {
	p := params{}
	for i := 0; i+1 < len(kv); i += 2 {
		var s string
		switch v := kv[i+1].(type) {
		case string:
			s = v
		case int:
			s = strconv.Itoa(v)
		case int32:
			s = strconv.Itoa(int(v))
		case int64:
			s = strconv.FormatInt(v, 10)
		default:
			panic("view: query value of an unexpected type")
		}
		p[kv[i].(string)] = []string{s}
	}
	return p
}
