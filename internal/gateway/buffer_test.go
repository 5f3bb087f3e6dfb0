package gateway

import "testing"

// A recycled answer buffer must have the length asked for and a class capacity, and a buffer
// that did not come from the pool (a rewritten answer of another size) must not enter it, or a
// later answer could be handed a slice too short for its frame.
func TestAnswerBuffersAreRecycledByClass(t *testing.T) {
	for _, n := range []int{1, 4096, 4097, 65 << 10, 4 << 20} {
		b := getBuffer(n)
		if len(b) != n || cap(b)&(cap(b)-1) != 0 || cap(b) < n {
			t.Fatalf("getBuffer(%d): len %d cap %d", n, len(b), cap(b))
		}
		putBuffer(b)
	}
	if b := getBuffer(4<<20 + 1); len(b) != 4<<20+1 {
		t.Fatalf("above the largest class: len %d", len(b))
	}
	odd := make([]byte, 10, 5000)
	putBuffer(odd)
	for range 100 {
		if b := getBuffer(4097); cap(b) != 8192 {
			t.Fatalf("class of 4097 bytes has capacity %d", cap(b))
		}
	}
}
