package shard

import "github.com/coordinatord/coordinatord/internal/state/log"

// divisible builds a Result's Records and Units for a write that may span several log batches
// (a group with tens of thousands of offsets has more tombstones than message.max.bytes holds).
// Each offset tombstone is a unit of its own: losing any suffix of them in a crash leaves fewer
// offsets, which replay reads and a retry deletes. A group's own tombstones form one unit placed
// after its offsets', so the group disappears only once its offsets have, and never half.
type divisible struct {
	recs  []log.Record
	units []int
}

// each adds records that may each land in a batch of their own.
func (d *divisible) each(recs ...log.Record) {
	for range recs {
		d.units = append(d.units, 1)
	}
	d.recs = append(d.recs, recs...)
}

// whole adds records that must share one batch.
func (d *divisible) whole(recs ...log.Record) {
	if len(recs) == 0 {
		return
	}
	d.units = append(d.units, len(recs))
	d.recs = append(d.recs, recs...)
}
