package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// classicMember is a franz-go classic-protocol member (cooperative-sticky) reporting what it
// holds through its callbacks, like nextGenMember.
func (d *daemon) classicMember(t *testing.T, own *ownership, id int, group, topic string) *nextGenMember {
	t.Helper()
	cb := func(add bool) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, _ *kgo.Client, p map[string][]int32) { own.update(id, p[topic], add) }
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(d.Addr),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.DisableAutoCommit(),
		kgo.SessionTimeout(10*time.Second),
		kgo.HeartbeatInterval(300*time.Millisecond),
		kgo.RebalanceTimeout(20*time.Second),
		kgo.OnPartitionsAssigned(cb(true)),
		kgo.OnPartitionsRevoked(cb(false)),
		kgo.OnPartitionsLost(cb(false)),
	)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			if fs := cl.PollFetches(context.Background()); fs.IsClientClosed() {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	t.Cleanup(cl.Close)
	return &nextGenMember{id: id, cl: cl}
}

// waitOwned waits until the members' callbacks show every partition owned once and evenly, and
// ListGroups shows the group Stable with the given type.
func waitOwned(t *testing.T, adm *kadm.Client, own *ownership, group, groupType string, members []*nextGenMember, partitions int) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		own.check(t)
		total, ok := 0, true
		for _, m := range members {
			n := len(own.of(m.id))
			total += n
			if n < partitions/len(members) || n > (partitions+len(members)-1)/len(members) {
				ok = false
			}
		}
		l, err := adm.ListGroups(ctxT(t))
		if err == nil && ok && total == partitions && l[group].GroupType == groupType && l[group].State == "Stable" {
			return
		}
		last = fmt.Sprintf("owned %d balanced %v listed %+v %v", total, ok, l[group], err)
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("group %s never settled as %s over %d members: %s", group, groupType, len(members), last)
}

// A rolling switch of franz-go members from the classic protocol to the consumer protocol and
// back, one member at a time, online: the first consumer-protocol member upgrades the group,
// the last one leaving downgrades it, and no partition is ever held by two members.
func TestConsumerMigrationKgoRollingSwitch(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, append([]string{"group.consumer.assignment.interval.ms=0"}, consumerKeys...)...)
	adm := kadm.NewClient(d.client())
	createTopic(t, adm, "t", 6)
	own := &ownership{owner: map[int32]int{}}
	var members []*nextGenMember
	for i := 0; i < 3; i++ {
		members = append(members, d.classicMember(t, own, i, "g", "t"))
	}
	waitOwned(t, adm, own, "g", "classic", members, 6)
	next := 3
	for i := 0; i < 3; i++ { // classic -> consumer
		members[0].cl.Close()
		members = members[1:]
		waitOwned(t, adm, own, "g", map[bool]string{true: "classic", false: "consumer"}[i == 0], members, 6)
		members = append(members, d.nextGenMember(t, own, next, "g", "t"))
		next++
		waitOwned(t, adm, own, "g", "consumer", members, 6)
	}
	for i := 0; i < 3; i++ { // consumer -> classic
		members[0].cl.Close()
		members = members[1:]
		if i == 2 {
			break // the last consumer-protocol member left: the classic ones are alone
		}
		waitOwned(t, adm, own, "g", "consumer", members, 6)
		members = append(members, d.classicMember(t, own, next, "g", "t"))
		next++
		waitOwned(t, adm, own, "g", "consumer", members, 6)
	}
	waitOwned(t, adm, own, "g", "classic", members, 6)
	own.check(t)
}
