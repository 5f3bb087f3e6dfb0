package meta

import (
	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
)

// MirrorResult says what a Mirror changed.
type MirrorResult struct {
	Created, Changed, Deleted []string
}

// Mirror makes the catalog equal to the upstream cluster's topics (gateway mode), where the
// upstream is authoritative: clients take topic ids and partition counts from the upstream's
// Metadata, so ours must be the same. A name whose id changed was deleted and re-created
// between two looks at the upstream; it is written as a delete and a create, so the deletion is
// seen by whoever reacts to deleted topics. Configs are kept as the upstream does not report
// them in Metadata.
func Mirror(topics []Topic) runtime.WriteOp[*Catalog] {
	return func(_ *runtime.Ctx[*Catalog], c *Catalog) runtime.Result {
		var res MirrorResult
		var recs []log.Record
		seen := make(map[string]bool, len(topics))
		for i := range topics {
			t := topics[i]
			seen[t.Name] = true
			old, ok := c.byName[t.Name]
			switch {
			case !ok:
				res.Created = append(res.Created, t.Name)
			case old.ID != t.ID:
				recs = append(recs, DeleteTopicRecord(t.Name))
				res.Deleted = append(res.Deleted, t.Name)
				res.Created = append(res.Created, t.Name)
			case old.Partitions != t.Partitions || old.ReplicationFactor != t.ReplicationFactor:
				t.Configs = old.Configs
				res.Changed = append(res.Changed, t.Name)
			default:
				continue
			}
			recs = append(recs, TopicRecord(&t))
		}
		for name := range c.byName {
			if !seen[name] {
				recs = append(recs, DeleteTopicRecord(name))
				res.Deleted = append(res.Deleted, name)
			}
		}
		return runtime.Result{Records: recs, Response: res}
	}
}
