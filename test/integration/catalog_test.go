package integration

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestTopicCatalogLifecycleSurvivesRestart(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	adm := kadm.NewClient(d.client())
	ctx := ctxT(t)

	created, err := adm.CreateTopics(ctx, 3, -1, map[string]*string{"cleanup.policy": strp("compact")}, "orders", "payments")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range created {
		if r.Err != nil || r.NumPartitions != 3 || r.ID == [16]byte{} {
			t.Fatalf("create %s: %+v", r.Topic, r)
		}
	}
	dup, _ := adm.CreateTopics(ctx, 1, -1, nil, "orders")
	if !errorsIs(dup["orders"].Err, kerr.TopicAlreadyExists) {
		t.Fatalf("re-create: %v", dup["orders"].Err)
	}
	bad, _ := adm.CreateTopics(ctx, 1, -1, nil, "bad name!", "orders_x")
	if !errorsIs(bad["bad name!"].Err, kerr.InvalidTopicException) || bad["orders_x"].Err != nil {
		t.Fatalf("validation: %+v", bad)
	}
	collide, _ := adm.CreateTopics(ctx, 1, -1, nil, "orders.x")
	if !errorsIs(collide["orders.x"].Err, kerr.InvalidTopicException) {
		t.Fatalf("'.'/'_' collision must be refused: %v", collide["orders.x"].Err)
	}
	zero, _ := adm.CreateTopics(ctx, 0, -1, nil, "zero")
	if !errorsIs(zero["zero"].Err, kerr.InvalidPartitions) {
		t.Fatalf("0 partitions: %v", zero["zero"].Err)
	}

	if _, err := adm.CreatePartitions(ctx, 2, "payments"); err != nil {
		t.Fatal(err)
	}
	shrink, _ := adm.UpdatePartitions(ctx, 2, "payments")
	if !errorsIs(shrink["payments"].Err, kerr.InvalidPartitions) {
		t.Fatalf("shrinking: %+v", shrink["payments"])
	}
	if _, err := adm.DeleteTopics(ctx, "orders_x"); err != nil {
		t.Fatal(err)
	}
	gone, _ := adm.DeleteTopics(ctx, "never-existed")
	if !errorsIs(gone["never-existed"].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("delete unknown: %+v", gone)
	}

	before, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if before["orders"].Partitions.NumReplicas() != 1 || len(before["orders"].Partitions) != 3 || len(before["payments"].Partitions) != 5 || len(before) != 2 {
		t.Fatalf("catalog: %v", before.Names())
	}

	if d.stop() != 0 {
		t.Fatal("stop")
	}
	d.start()
	adm = kadm.NewClient(d.client())
	after, err := adm.ListTopics(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	for name, td := range before {
		a := after[name]
		if a.ID != td.ID || len(a.Partitions) != len(td.Partitions) {
			t.Fatalf("%s changed across restart: id %v→%v, partitions %d→%d", name, td.ID, a.ID, len(td.Partitions), len(a.Partitions))
		}
	}
	if len(after) != 2 {
		t.Fatalf("after restart: %v", after.Names())
	}
	// Metadata v12 by id finds the topic (spec T24).
	c := dialRaw(t, d.Addr)
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.TopicID = before["orders"].ID
	req.Topics = []kmsg.MetadataRequestTopic{rt}
	c.write(frame(req, 12, 1, strp("c"), nil))
	resp := kmsg.NewPtrMetadataResponse()
	c.read(resp, 12, 1)
	if len(resp.Topics) != 1 || resp.Topics[0].Topic == nil || *resp.Topics[0].Topic != "orders" {
		t.Fatalf("by id: %+v", resp.Topics)
	}
}
