package e2e

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
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
	// servedBy and servedAt: the node that answered the last successful heartbeat, and when.
	servedBy int32
	servedAt time.Time
	rejoins  int
}

// beatFunc sends one heartbeat (epoch 0 joins, -1 leaves) and returns the epoch and interval
// the coordinator answered, how many partitions or tasks the member now holds and the node
// that answered.
type beatFunc func(ctx context.Context, epoch int32) (newEpoch int32, interval time.Duration, assigned int, by int32, err error)

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
			e, iv, n, by, err := beat(ctx, epoch)
			cancel()
			m.mu.Lock()
			m.lastErr = err
			if err == nil {
				m.epoch, m.assigned, m.servedBy, m.servedAt = e, n, by, time.Now()
				// Faster than the coordinator asks, so that a new assignment is acknowledged at once.
				interval = min(iv/4, time.Second)
			} else if errors.Is(err, kerr.UnknownMemberID) || errors.Is(err, kerr.FencedMemberEpoch) {
				// What Kafka's clients do: join again with epoch 0, holding nothing.
				m.epoch, m.assigned = 0, 0
				m.rejoins++
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

// served reports the node that answered the member's last successful heartbeat and when.
func (m *liveMember) served() (int32, time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.servedBy, m.servedAt
}

// coordinated sends a group's heartbeats to the node coordinating it, as a client does: it
// asks FindCoordinator first and again after the coordinator refused the group or could not
// be reached (kgo routes neither heartbeat type on its own with retries, since a heartbeat
// carries reconciliation state).
type coordinated struct {
	cl    *kgo.Client
	group string
	node  int32 // -1: ask again
}

func (c *coordinated) send(ctx context.Context, req kmsg.Request, code func(kmsg.Response) (int16, *string)) (kmsg.Response, int32, error) {
	if c.node < 0 {
		r := kadm.NewClient(c.cl).FindGroupCoordinators(ctx, c.group)[c.group]
		if r.Err != nil {
			return nil, -1, r.Err
		}
		c.node = r.NodeID
	}
	by := c.node
	resp, err := c.cl.Broker(int(by)).Request(ctx, req)
	if err == nil {
		err = kerrOf(code(resp))
	}
	if err != nil && !errors.Is(err, kerr.UnknownMemberID) && !errors.Is(err, kerr.FencedMemberEpoch) {
		c.node = -1
	}
	return resp, by, err
}

// startStreamsMember joins a KIP-1071 streams group with a one-subtopology topology reading
// source (with a changelog topic for its store) and acknowledges every assignment it gets.
func startStreamsMember(t *testing.T, cl *kgo.Client, group, memberID, processID, source string) *liveMember {
	var active []kmsg.TaskIDs
	to := &coordinated{cl: cl, group: group, node: -1}
	return startLiveMember(t, func(ctx context.Context, epoch int32) (int32, time.Duration, int, int32, error) {
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
		raw, by, err := to.send(ctx, r, func(r kmsg.Response) (int16, *string) {
			resp := r.(*kmsg.StreamsGroupHeartbeatResponse)
			return resp.ErrorCode, resp.ErrorMessage
		})
		if err != nil {
			return epoch, 0, 0, by, err
		}
		resp := raw.(*kmsg.StreamsGroupHeartbeatResponse)
		if resp.ActiveTasks != nil {
			active = resp.ActiveTasks
		}
		n := 0
		for _, a := range active {
			n += len(a.Partitions)
		}
		return resp.MemberEpoch, time.Duration(resp.HeartbeatIntervalMillis) * time.Millisecond, n, by, nil
	})
}

// startConsumerMember joins a KIP-848 consumer group subscribed to topic as memberID (chosen by
// the client since ConsumerGroupHeartbeat v1) and acknowledges every assignment it gets.
func startConsumerMember(t *testing.T, cl *kgo.Client, group, memberID, topic string) *liveMember {
	var owned []kmsg.ConsumerGroupHeartbeatRequestTopic
	to := &coordinated{cl: cl, group: group, node: -1}
	return startLiveMember(t, func(ctx context.Context, epoch int32) (int32, time.Duration, int, int32, error) {
		r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		r.Group, r.MemberID, r.MemberEpoch = group, memberID, epoch
		if epoch == 0 {
			r.SubscribedTopicNames, r.RebalanceTimeoutMillis = []string{topic}, 30000
			owned = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		}
		if epoch >= 0 {
			r.Topics = owned
		}
		raw, by, err := to.send(ctx, r, func(r kmsg.Response) (int16, *string) {
			resp := r.(*kmsg.ConsumerGroupHeartbeatResponse)
			return resp.ErrorCode, resp.ErrorMessage
		})
		if err != nil {
			return epoch, 0, 0, by, err
		}
		resp := raw.(*kmsg.ConsumerGroupHeartbeatResponse)
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
		return resp.MemberEpoch, time.Duration(resp.HeartbeatIntervalMillis) * time.Millisecond, n, by, nil
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
