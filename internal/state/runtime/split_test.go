package runtime

import (
	"errors"
	"testing"

	"github.com/coordinatord/coordinatord/internal/state/log"
)

type maxRecords int

func (m maxRecords) CheckBatch(recs []log.Record) error {
	if len(recs) > int(m) {
		return log.ErrBatchTooLarge
	}
	return nil
}

// Batches hold whole units only, as many as fit, in order; a unit larger than a batch, or no
// units at all, refuses the write instead of splitting it.
func TestSplitBatchesKeepsUnitsWhole(t *testing.T) {
	recs := make([]log.Record, 10)
	got, err := splitBatches(maxRecords(4), recs, []int{1, 1, 3, 1, 2, 2})
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int
	for _, b := range got {
		sizes = append(sizes, len(b))
	}
	if want := []int{2, 4, 4}; len(sizes) != len(want) || sizes[0] != 2 || sizes[1] != 4 || sizes[2] != 4 {
		t.Fatalf("batch sizes %v, want %v", sizes, want)
	}
	if _, err := splitBatches(maxRecords(4), recs, []int{1, 5, 4}); !errors.Is(err, log.ErrBatchTooLarge) {
		t.Fatalf("unit of 5 with batches of 4: %v", err)
	}
	if _, err := splitBatches(maxRecords(4), recs, nil); !errors.Is(err, log.ErrBatchTooLarge) {
		t.Fatalf("no units: %v", err)
	}
	if _, err := splitBatches(maxRecords(4), recs, []int{1, 1}); !errors.Is(err, log.ErrBatchTooLarge) {
		t.Fatalf("units covering 2 of 10 records: %v", err)
	}
}
