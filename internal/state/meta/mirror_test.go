package meta

import (
	"reflect"
	"sort"
	"testing"
)

// apply runs a mirror against c and replays its records, as the runtime would.
func apply(t *testing.T, c *Catalog, topics []Topic) MirrorResult {
	t.Helper()
	res := Mirror(topics)(nil, c)
	for i, r := range res.Records {
		if err := c.Replay(int64(i), r); err != nil {
			t.Fatal(err)
		}
	}
	return res.Response.(MirrorResult)
}

func TestMirrorFollowsTheUpstream(t *testing.T) {
	c := NewCatalog()
	orders := Topic{Name: "orders", ID: [16]byte{1}, Partitions: 3, ReplicationFactor: 3}
	pays := Topic{Name: "payments", ID: [16]byte{2}, Partitions: 1, ReplicationFactor: 3}
	r := apply(t, c, []Topic{orders, pays})
	sort.Strings(r.Created)
	if !reflect.DeepEqual(r.Created, []string{"orders", "payments"}) || len(r.Deleted) != 0 {
		t.Fatalf("first mirror %+v", r)
	}

	// Unchanged: nothing written.
	if res := Mirror([]Topic{orders, pays})(nil, c); len(res.Records) != 0 {
		t.Fatalf("an unchanged upstream wrote %d records", len(res.Records))
	}

	// orders grew, payments was deleted and re-created under a new id, audit is gone.
	audit := Topic{Name: "audit", ID: [16]byte{3}, Partitions: 1}
	apply(t, c, []Topic{orders, pays, audit})
	grown := orders
	grown.Partitions = 6
	recreated := pays
	recreated.ID = [16]byte{9}
	r = apply(t, c, []Topic{grown, recreated})
	if !reflect.DeepEqual(r.Changed, []string{"orders"}) {
		t.Fatalf("changed %v, want [orders]", r.Changed)
	}
	sort.Strings(r.Deleted)
	if !reflect.DeepEqual(r.Deleted, []string{"audit", "payments"}) {
		t.Fatalf("deleted %v: a re-created topic must count as deleted too", r.Deleted)
	}
	snap := c.Snapshot()
	if tp, _ := snap.Topic("orders"); tp.Partitions != 6 {
		t.Fatalf("orders has %d partitions, want 6", tp.Partitions)
	}
	if _, ok := snap.TopicByID([16]byte{2}); ok {
		t.Fatal("the old id of payments still resolves")
	}
	if tp, ok := snap.TopicByID([16]byte{9}); !ok || tp.Name != "payments" {
		t.Fatal("the new id of payments does not resolve")
	}
	if _, ok := snap.Topic("audit"); ok {
		t.Fatal("a topic gone upstream is still in the catalog")
	}
}
