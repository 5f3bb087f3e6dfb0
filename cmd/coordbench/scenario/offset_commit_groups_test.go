package scenario

import "testing"

// Every one of the 10 000 groups is some client's, and a client's turns visit all of its own
// groups before any twice, whether or not the client count divides the group count.
func TestOffsetCommitGroupsCoverEveryGroup(t *testing.T) {
	for _, n := range []int{8, 64, 256, 3} {
		owner := make([]int, offsetCommitGroupCount)
		for j := range owner {
			owner[j] = -1
		}
		for i := range n {
			own := 0
			for j := i; j < offsetCommitGroupCount; j += n {
				own++
			}
			for turn := range own {
				j := groupOfTurn(i, turn, n, offsetCommitGroupCount)
				if j < 0 || j >= offsetCommitGroupCount || owner[j] != -1 {
					t.Fatalf("n=%d: client %d turn %d: group %d out of range or visited twice (owner %d)", n, i, turn, j, owner[j])
				}
				owner[j] = i
			}
			if j := groupOfTurn(i, own, n, offsetCommitGroupCount); owner[j] != i {
				t.Fatalf("n=%d: client %d's turn after a full cycle went to group %d (client %d's)", n, i, j, owner[j])
			}
		}
		for j, o := range owner {
			if o == -1 {
				t.Fatalf("n=%d: group %d never committed to", n, j)
			}
		}
	}
}
