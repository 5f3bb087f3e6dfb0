package handlers

import (
	"slices"
	"testing"
)

func TestDistinctGroupsKeepsEveryRepeatAnswered(t *testing.T) {
	ids := []string{"a", "b", "a", "c", "b", "a"}
	distinct, at := distinctGroups(ids)
	if !slices.Equal(distinct, []string{"a", "b", "c"}) {
		t.Fatalf("distinct %v", distinct)
	}
	answers := []string{"A", "B", "C"}
	if got := expandAnswers(answers, at); !slices.Equal(got, []string{"A", "B", "A", "C", "B", "A"}) {
		t.Fatalf("expanded %v", got)
	}
	distinct, at = distinctGroups([]string{"x", "y"})
	if !slices.Equal(distinct, []string{"x", "y"}) || at != nil {
		t.Fatalf("no repeats: %v %v", distinct, at)
	}
	if got := expandAnswers([]string{"X", "Y"}, at); !slices.Equal(got, []string{"X", "Y"}) {
		t.Fatalf("no repeats expanded %v", got)
	}
}
