package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Live group members that need no record data: they heartbeat on the wire, so a standalone
// coordinatord (which has no Fetch) can hold groups of every type for Kafka's tools to show.

// liveMember heartbeats in the background until the test ends, then leaves the group.
type liveMember struct {
	t    *testing.T
	stop chan struct{}
	done chan struct{}

	mu       sync.Mutex
	epoch    int32
	assigned int // partitions or active tasks held after the last answer
	lastErr  error
}

// beatFunc sends one heartbeat (epoch 0 joins, -1 leaves) and returns the epoch and interval
// the coordinator answered, and how many partitions or tasks the member now holds.
type beatFunc func(ctx context.Context, epoch int32) (newEpoch int32, interval time.Duration, assigned int, err error)

func startLiveMember(t *testing.T, beat beatFunc) *liveMember {
	t.Helper()
	m := &liveMember{t: t, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		interval := 100 * time.Millisecond
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			m.mu.Lock()
			epoch := m.epoch
			m.mu.Unlock()
			e, iv, n, err := beat(ctx, epoch)
			cancel()
			m.mu.Lock()
			m.lastErr = err
			if err == nil {
				m.epoch, m.assigned = e, n
				// Faster than the coordinator asks, so that a new assignment is acknowledged at once.
				interval = min(iv/4, time.Second)
			}
			m.mu.Unlock()
			select {
			case <-m.stop:
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				beat(ctx, -1)
				cancel()
				return
			case <-time.After(interval):
			}
		}
	}()
	t.Cleanup(m.leave)
	return m
}

// leave stops the heartbeats with a leave heartbeat; safe to call twice.
func (m *liveMember) leave() {
	select {
	case <-m.stop:
	default:
		close(m.stop)
	}
	<-m.done
}

// waitHolding waits until the member holds n partitions or tasks.
func (m *liveMember) waitHolding(n int) {
	m.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		m.mu.Lock()
		held := m.assigned
		m.mu.Unlock()
		if held == n {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.t.Fatalf("member holds %d, want %d (last heartbeat error: %v)", m.assigned, n, m.lastErr)
}

// startStreamsMember joins a KIP-1071 streams group with a one-subtopology topology reading
// source (with a changelog topic for its store) and acknowledges every assignment it gets.
func startStreamsMember(t *testing.T, cl *kgo.Client, group, memberID, processID, source string) *liveMember {
	var active []kmsg.TaskIDs
	return startLiveMember(t, func(ctx context.Context, epoch int32) (int32, time.Duration, int, error) {
		r := kmsg.NewPtrStreamsGroupHeartbeatRequest()
		r.Group, r.MemberID, r.MemberEpoch = group, memberID, epoch
		if epoch == 0 {
			st := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopology()
			st.SubtopologyID, st.SourceTopics = "0", []string{source}
			changelog := kmsg.NewTopicInfo()
			changelog.Topic = group + "-counts-changelog"
			st.StateChangelogTopics = []kmsg.TopicInfo{changelog}
			tp := kmsg.NewStreamsGroupHeartbeatRequestTopology()
			tp.Subtopologies = []kmsg.StreamsGroupHeartbeatRequestTopologySubtopology{st}
			r.Topology, r.RebalanceTimeoutMillis, r.ProcessID = &tp, 30000, &processID
			active = []kmsg.TaskIDs{}
		}
		if epoch >= 0 {
			r.ActiveTasks, r.StandbyTasks, r.WarmupTasks = active, []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
		}
		resp, err := r.RequestWith(ctx, cl.Broker(nodeID))
		if err != nil {
			return epoch, 0, 0, err
		}
		if err := kerrOf(resp.ErrorCode, resp.ErrorMessage); err != nil {
			return epoch, 0, 0, err
		}
		if resp.ActiveTasks != nil {
			active = resp.ActiveTasks
		}
		n := 0
		for _, a := range active {
			n += len(a.Partitions)
		}
		return resp.MemberEpoch, time.Duration(resp.HeartbeatIntervalMillis) * time.Millisecond, n, nil
	})
}

// startConsumerMember joins a KIP-848 consumer group subscribed to topic as memberID (chosen by
// the client since ConsumerGroupHeartbeat v1) and acknowledges every assignment it gets.
func startConsumerMember(t *testing.T, cl *kgo.Client, group, memberID, topic string) *liveMember {
	var owned []kmsg.ConsumerGroupHeartbeatRequestTopic
	return startLiveMember(t, func(ctx context.Context, epoch int32) (int32, time.Duration, int, error) {
		r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		r.Group, r.MemberID, r.MemberEpoch = group, memberID, epoch
		if epoch == 0 {
			r.SubscribedTopicNames, r.RebalanceTimeoutMillis = []string{topic}, 30000
			owned = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		}
		if epoch >= 0 {
			r.Topics = owned
		}
		resp, err := r.RequestWith(ctx, cl.Broker(nodeID))
		if err != nil {
			return epoch, 0, 0, err
		}
		if err := kerrOf(resp.ErrorCode, resp.ErrorMessage); err != nil {
			return epoch, 0, 0, err
		}
		if a := resp.Assignment; a != nil {
			owned = owned[:0]
			for _, tp := range a.Topics {
				o := kmsg.NewConsumerGroupHeartbeatRequestTopic()
				o.TopicID, o.Partitions = tp.TopicID, tp.Partitions
				owned = append(owned, o)
			}
		}
		n := 0
		for _, o := range owned {
			n += len(o.Partitions)
		}
		return resp.MemberEpoch, time.Duration(resp.HeartbeatIntervalMillis) * time.Millisecond, n, nil
	})
}

// kerrOf is a heartbeat answer's error with the coordinator's message, nil when there is none.
func kerrOf(code int16, msg *string) error {
	err := kerr.ErrorForCode(code)
	if err != nil && msg != nil {
		return fmt.Errorf("%w: %s", err, *msg)
	}
	return err
}
