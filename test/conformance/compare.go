package conformance

// Comparing responses: expect (a JSON subset of one response), normalization (what may
// legitimately differ between two servers is replaced by a placeholder), and diff (two
// normalized responses, field by field, minus the differences a scenario explains).

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
)

// match checks that want (parsed scenario JSON) is a subset of got (a response tree): every
// field named in want exists with that value; arrays must have the same length. It returns
// one message per mismatch.
func match(want, got any, path string) []string {
	show := func() string { return display(got, path) }
	name := path
	if name == "" {
		name = "response"
	}
	switch w := want.(type) {
	case map[string]any:
		o, ok := got.(*Obj)
		if !ok {
			return []string{fmt.Sprintf("%s is %s, want an object", name, show())}
		}
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var out []string
		for _, k := range keys {
			e, ok := o.Vals[k]
			if !ok {
				out = append(out, fmt.Sprintf("%s has no field %q; fields are %s", name, k, strings.Join(o.Keys, ", ")))
				continue
			}
			out = append(out, match(w[k], e, join(path, k))...)
		}
		return out
	case []any:
		if got == nil && len(w) == 0 {
			return nil // kmsg decodes an empty array as nil: [] and null read the same
		}
		a, ok := got.([]any)
		if !ok {
			return []string{fmt.Sprintf("%s is %s, want an array of %d", name, show(), len(w))}
		}
		if len(a) != len(w) {
			return []string{fmt.Sprintf("%s has %d elements, want %d: %s", name, len(a), len(w), render(got))}
		}
		var out []string
		for i := range w {
			out = append(out, match(w[i], a[i], join(path, strconv.Itoa(i)))...)
		}
		return out
	case nil:
		if got != nil {
			return []string{fmt.Sprintf("%s is %s, want null", name, show())}
		}
		return nil
	case json.Number:
		n, ok := got.(int64)
		if ok && w.String() == strconv.FormatInt(n, 10) {
			return nil
		}
		if f, ok := got.(float64); ok {
			if wf, err := w.Float64(); err == nil && wf == f {
				return nil
			}
		}
		return []string{fmt.Sprintf("%s is %s, want %s", name, show(), w)}
	case string:
		switch g := got.(type) {
		case string:
			if g == w {
				return nil
			}
		case UUID:
			if string(g) == w {
				return nil
			}
		case int64:
			if isErrorCodeField(path) {
				if c, ok := errorCodeByName(w); ok && int64(c) == g {
					return nil
				}
			}
		}
		return []string{fmt.Sprintf("%s is %s, want %q", name, show(), w)}
	case bool:
		if g, ok := got.(bool); ok && g == w {
			return nil
		}
		return []string{fmt.Sprintf("%s is %s, want %v", name, show(), w)}
	}
	return []string{fmt.Sprintf("%s: unsupported expectation %T", name, want)}
}

// display renders a value, naming error codes.
func display(v any, path string) string {
	if n, ok := v.(int64); ok && isErrorCodeField(path) {
		return fmt.Sprintf("%d (%s)", n, errorName(n))
	}
	return render(v)
}

// Field names whose values are a broker id: they differ between any two clusters.
var nodeFields = map[string]bool{
	"NodeID": true, "ControllerID": true, "Leader": true, "LeaderID": true,
	"Replicas": true, "ISR": true, "OfflineReplicas": true,
}

// normalize returns a copy of a response tree with what legitimately differs between two
// servers replaced by placeholders:
//
//   - ThrottleMillis is 0 (quotas are not compared);
//   - this target's node id in broker-id fields is ${node}; its advertised host and port in
//     Host and Port are ${host} and ${port}; its cluster id in ClusterID is ${cluster};
//   - a string equal to a captured variable is ${name} (server-generated member ids);
//   - a non-zero UUID is its captured name, else <uuid> (capture an id to compare it with a
//     later one: servers generate their own topic ids);
//   - an ErrorMessage that is set is <message>: set-versus-null is compared, the text is not;
//   - a positive value in a field whose name contains Timestamp is <timestamp>.
func (r *Run) normalize(v any) any {
	return r.norm(clone(v), "")
}

func (r *Run) norm(v any, field string) any {
	switch x := v.(type) {
	case *Obj:
		r.dropGatewaySelf(x)
		for _, k := range x.Keys {
			x.Vals[k] = r.norm(x.Vals[k], k)
		}
		return x
	case []any:
		for i := range x {
			x[i] = r.norm(x[i], field)
		}
		return x
	case int64:
		switch {
		case field == "ThrottleMillis":
			return int64(0)
		case nodeFields[field] && x == int64(r.Target.NodeID):
			return "${node}"
		case nodeFields[field] && r.isUpstreamNode(x):
			return "${node}"
		case field == "Port" && (x == int64(r.Target.Port) || r.isGatewayPort(x) || r.isSASLPort(x)):
			return "${port}"
		case strings.Contains(field, "Timestamp") && x > 0:
			return "<timestamp>"
		}
		return x
	case string:
		switch {
		case field == "ErrorMessage":
			return "<message>"
		case field == "Host" && x == r.Target.Host:
			return "${host}"
		case field == "ClusterID" && x == r.Target.ClusterID && x != "":
			return "${cluster}"
		}
		if name := r.capturedName(x); name != "" {
			return "${" + name + "}"
		}
		return r.sharedName(x)
	case UUID:
		if x == zeroUUID {
			return x
		}
		if name := r.capturedName(string(x)); name != "" {
			return "${" + name + "}"
		}
		return "<uuid>"
	}
	return v
}

// sharedName replaces this target's own ${run} in a name by <run>. Targets that share a
// broker (gateway mode) have runs of their own, so each sees the other's names, unchanged.
func (r *Run) sharedName(s string) string {
	if r.vars["run"] == "" {
		return s
	}
	return strings.ReplaceAll(s, r.vars["run"], "<run>")
}

// In gateway mode, coordinatord answers as one node and forwards to the upstream broker under
// another id at another port; both stand for the one broker the reference answers as.
func (r *Run) isUpstreamNode(x int64) bool {
	_, ok := r.Target.Upstream[int32(x)]
	return ok
}

// isSASLPort says whether x is the port of the target's SASL listener, which it advertises to
// the connections that came in there (Metadata, FindCoordinator).
func (r *Run) isSASLPort(x int64) bool {
	_, port, err := net.SplitHostPort(r.Target.SASLAddr)
	return err == nil && strconv.FormatInt(x, 10) == port
}

func (r *Run) isGatewayPort(x int64) bool {
	for _, p := range r.Target.Upstream {
		if int64(p) == x {
			return true
		}
	}
	return false
}

// dropGatewaySelf removes coordinatord's own entry from a broker list that also names an
// upstream broker (Metadata, DescribeCluster): the gateway lists itself as one extra broker
// with no partitions, which the reference broker, alone in its cluster, cannot have.
// test/e2e checks that entry (TestGateway_S1_*).
func (r *Run) dropGatewaySelf(o *Obj) {
	if !r.Target.Gateway {
		return
	}
	list, ok := o.Vals["Brokers"].([]any)
	if !ok {
		return
	}
	self, other := -1, false
	for i, e := range list {
		b, ok := e.(*Obj)
		if !ok {
			return
		}
		id, _ := b.Vals["NodeID"].(int64)
		if id == int64(r.Target.NodeID) {
			self = i
		} else if r.isUpstreamNode(id) {
			other = true
		}
	}
	if self >= 0 && other {
		o.Vals["Brokers"] = append(append([]any(nil), list[:self]...), list[self+1:]...)
	}
}

func (r *Run) capturedName(s string) string {
	if s == "" {
		return ""
	}
	for i := len(r.captured) - 1; i >= 0; i-- {
		if r.vars[r.captured[i]] == s {
			return r.captured[i]
		}
	}
	return ""
}

// Difference is one path where two normalized responses disagree.
type Difference struct {
	Path []string
	A, B any
	// Missing is "a" or "b" when the field exists on one side only.
	Missing string
}

func diffTrees(a, b any, path []string, out *[]Difference) {
	sub := func(k string) []string { return append(append([]string(nil), path...), k) }
	switch x := a.(type) {
	case *Obj:
		y, ok := b.(*Obj)
		if !ok {
			break
		}
		for _, k := range x.Keys {
			if _, ok := y.Vals[k]; !ok {
				*out = append(*out, Difference{Path: sub(k), A: x.Vals[k], Missing: "b"})
				continue
			}
			diffTrees(x.Vals[k], y.Vals[k], sub(k), out)
		}
		for _, k := range y.Keys {
			if _, ok := x.Vals[k]; !ok {
				*out = append(*out, Difference{Path: sub(k), B: y.Vals[k], Missing: "a"})
			}
		}
		return
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			break
		}
		for i := range x {
			diffTrees(x[i], y[i], sub(strconv.Itoa(i)), out)
		}
		return
	}
	if render(a) != render(b) {
		*out = append(*out, Difference{Path: path, A: a, B: b})
	}
}

// covers says whether an except path (with * for any one segment) covers a difference path:
// it matches the path or one of its prefixes.
func covers(pattern, path []string) bool {
	if len(pattern) > len(path) {
		return false
	}
	for i, p := range pattern {
		if p != "*" && p != path[i] {
			return false
		}
	}
	return true
}

// explain removes the differences an except of ck covers, marking those excepts as hit, and
// returns the rest. With an apikeys table, ApiKeys is compared by the table instead.
func explain(ck *Check, diffs []Difference) []Difference {
	var rest []Difference
	for _, d := range diffs {
		if ck.APIKeys != "" && len(d.Path) > 0 && d.Path[0] == "ApiKeys" {
			continue
		}
		explained := false
		for _, e := range ck.Excepts {
			if e.Select == nil && covers(e.Path, d.Path) {
				e.Hit = true
				explained = true
			}
		}
		if !explained {
			rest = append(rest, d)
		}
	}
	return rest
}

// formatDiffs renders differences as an aligned table.
func formatDiffs(diffs []Difference, nameA, nameB string) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 2, 4, 2, ' ', 0)
	fmt.Fprintf(w, "    path\t%s\t%s\n", nameA, nameB)
	for _, d := range diffs {
		p := strings.Join(d.Path, ".")
		if p == "" {
			p = "(response)"
		}
		a, bb := display(d.A, p), display(d.B, p)
		switch d.Missing {
		case "a":
			a = "(no such field)"
		case "b":
			bb = "(no such field)"
		}
		fmt.Fprintf(w, "    %s\t%s\t%s\n", p, clip(a), clip(bb))
	}
	w.Flush()
	return strings.TrimRight(b.String(), "\n")
}

// clip keeps difference tables readable; CONFORMANCE_FULL=1 shows whole values.
func clip(s string) string {
	if len(s) > 300 && os.Getenv("CONFORMANCE_FULL") == "" {
		return s[:300] + "..."
	}
	return s
}

// filterSelected returns copies of two normalized responses without the array elements the
// check's selector exceptions name, marking each exception that removed something.
// It also sorts the arrays the check names in sort lines.
func filterSelected(ck *Check, ra, rb *Run, a, b any) (any, any) {
	has := len(ck.Sorts) > 0
	for _, e := range ck.Excepts {
		has = has || e.Select != nil
	}
	if !has {
		return a, b
	}
	a, b = clone(a), clone(b)
	for _, so := range ck.Sorts {
		sortArrays(a, so.Path, so.Field)
		sortArrays(b, so.Path, so.Field)
	}
	for _, e := range ck.Excepts {
		if e.Select == nil {
			continue
		}
		var n int
		a = dropSelected(a, e.Path, ra.selector(e.Select), &n)
		b = dropSelected(b, e.Path, rb.selector(e.Select), &n)
		if n > 0 {
			e.Hit = true
		}
	}
	return a, b
}

// selector returns sel with this run's variables substituted (an unknown one is left as is).
func (r *Run) selector(sel *Selector) *Selector {
	out := *sel
	if v, err := r.subst(sel.Value); err == nil {
		out.Value = r.sharedName(v)
	}
	return &out
}

func (s *Selector) picks(v any) bool {
	text := selectorText(v)
	switch s.Op {
	case "~", "!~":
		re, err := regexp.Compile(s.Value)
		if err != nil {
			return false
		}
		return re.MatchString(text) == (s.Op == "~")
	}
	return text == s.Value
}

func dropSelected(v any, path []string, sel *Selector, n *int) any {
	if len(path) == 0 {
		arr, ok := v.([]any)
		if !ok {
			return v
		}
		kept := arr[:0:0]
		for _, e := range arr {
			if o, ok := e.(*Obj); ok {
				if f, ok := o.Vals[sel.Field]; ok && sel.picks(f) {
					*n++
					continue
				}
			}
			kept = append(kept, e)
		}
		if len(kept) == 0 {
			return nil // kmsg decodes an empty array as nil
		}
		return kept
	}
	switch x := v.(type) {
	case *Obj:
		for _, k := range x.Keys {
			if path[0] == "*" || path[0] == k {
				x.Vals[k] = dropSelected(x.Vals[k], path[1:], sel, n)
			}
		}
	case []any:
		for i := range x {
			if path[0] == "*" || path[0] == strconv.Itoa(i) {
				x[i] = dropSelected(x[i], path[1:], sel, n)
			}
		}
	}
	return v
}

func selectorText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case UUID:
		return string(x)
	}
	return render(v)
}

func sortArrays(v any, path []string, field string) {
	if len(path) == 0 {
		arr, ok := v.([]any)
		if !ok {
			return
		}
		key := func(e any) string {
			if o, ok := e.(*Obj); ok {
				return selectorText(o.Vals[field])
			}
			return render(e)
		}
		sort.SliceStable(arr, func(i, j int) bool { return key(arr[i]) < key(arr[j]) })
		return
	}
	switch x := v.(type) {
	case *Obj:
		for _, k := range x.Keys {
			if path[0] == "*" || path[0] == k {
				sortArrays(x.Vals[k], path[1:], field)
			}
		}
	case []any:
		for i := range x {
			if path[0] == "*" || path[0] == strconv.Itoa(i) {
				sortArrays(x[i], path[1:], field)
			}
		}
	}
}
