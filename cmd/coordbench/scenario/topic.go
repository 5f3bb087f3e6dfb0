package scenario

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// topicWait bounds how long a new topic may take to show a leader for every partition.
const topicWait = 15 * time.Second

// targetCreatesTopics reports whether the target serves CreateTopics (key 19), as a bootstrap
// connection of its own sees it.
func targetCreatesTopics(ctx context.Context, env *Env) (bool, error) {
	boot, err := env.Dial(ctx, "", -1)
	if err != nil {
		return false, err
	}
	defer boot.Close()
	return boot.Supports(19), nil
}

// ensureTopic creates topic with the given partition count if the target serves CreateTopics
// (a real broker, kfake) and returns its id. A pure coordinator without CreateTopics gets
// neither: the scenario then commits by name only (its topic ids come in later work).
func ensureTopic(ctx context.Context, env *Env, topic string, partitions int32, canCreate bool) ([16]byte, error) {
	if !canCreate {
		return [16]byte{}, nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.Addr))
	if err != nil {
		return [16]byte{}, fmt.Errorf("client for topic %s: %w", topic, err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	_, err = adm.CreateTopic(ctx, partitions, 1, nil, topic)
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return [16]byte{}, fmt.Errorf("create topic %s: %w", topic, err)
	}
	deadline := time.Now().Add(topicWait)
	for {
		td, err := adm.ListTopics(ctx, topic)
		if err == nil {
			d, ok := td[topic]
			if ok && d.Err == nil && len(d.Partitions) == int(partitions) && allLed(d.Partitions) {
				return d.ID, nil
			}
		}
		if time.Now().After(deadline) {
			return [16]byte{}, fmt.Errorf("topic %s has no leader for every partition after %s (last error %v)", topic, topicWait, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func allLed(ps kadm.PartitionDetails) bool {
	for _, p := range ps {
		if p.Leader < 0 || p.Err != nil {
			return false
		}
	}
	return true
}
