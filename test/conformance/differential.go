package conformance

import (
	"fmt"
	"sort"
	"strings"
)

// Compare evaluates every diff check of sc over the runs of the two targets and returns one
// message per unexplained difference. a is coordinatord, b the reference broker.
func Compare(sc *Scenario, a, b *Run) []string {
	var out []string
	for i, st := range sc.Steps {
		if i >= a.Reached || i >= b.Reached {
			break // a run stopped early; its failure says why
		}
		for _, ck := range st.Checks {
			if ck.Kind != "diff" {
				continue
			}
			// Versions with the same differences are reported once, as a range.
			var group []int16
			var groupText string
			flush := func() {
				if len(group) > 0 && groupText != "" {
					out = append(out, fmt.Sprintf("%s:%d: %s (responses %s): unexplained difference(s) (fix coordinatord, or add \"<path> [id] why\" under diff and a row for the id in docs/conformance.md):\n%s",
						sc.File, ck.Line, stepText(st), versionList(group), groupText))
				}
				group, groupText = nil, ""
			}
			for _, v := range stepVersions(a, b, i) {
				ra, rb := a.results[resultKey{i, v}], b.results[resultKey{i, v}]
				if ra == nil || rb == nil {
					continue
				}
				na, nb := filterSelected(ck, a, b, ra.norm, rb.norm)
				var diffs []Difference
				diffTrees(na, nb, nil, &diffs)
				text := ""
				if rest := explain(ck, diffs); len(rest) > 0 {
					text = formatDiffs(rest, a.Target.Name, b.Target.Name)
				}
				if text != groupText || (len(group) > 0 && group[len(group)-1] != v-1) {
					flush()
				}
				group, groupText = append(group, v), text
			}
			flush()
		}
	}
	return out
}

// Stale reports the diff exceptions that never matched a difference: the behaviour they
// explain is gone, so they and their docs/conformance.md rows should go too.
func Stale(sc *Scenario) []string {
	var out []string
	for _, st := range sc.Steps {
		for _, ck := range st.Checks {
			for _, e := range ck.Excepts {
				if !e.Hit {
					out = append(out, fmt.Sprintf("%s:%d: exception %s [%s] matched no difference: coordinatord now agrees with Kafka there; remove it (and its docs/conformance.md row if nothing else uses it)",
						sc.File, e.Line, strings.Join(e.Path, "."), e.Tag))
				}
			}
		}
	}
	return out
}

func stepVersions(a, b *Run, step int) []int16 {
	seen := map[int16]bool{}
	for k := range a.results {
		if k.step == step {
			seen[k.version] = true
		}
	}
	for k := range b.results {
		if k.step == step {
			seen[k.version] = true
		}
	}
	out := make([]int16, 0, len(seen))
	for v := range seen {
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func versionList(vs []int16) string {
	if len(vs) == 1 {
		return fmt.Sprintf("v%d", vs[0])
	}
	return fmt.Sprintf("v%d-%d", vs[0], vs[len(vs)-1])
}
