// Package upstream is coordinatord's own client of the upstream Kafka cluster in gateway mode:
// it keeps the cluster's view (brokers with their real addresses, topics with their ids, each
// broker's ApiVersions) fresh, so the gateway can map ports and rewrite answers, and the topic
// catalog can mirror the cluster.
package upstream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coordinatord/coordinatord/pkg/kerrclass"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// Broker is one upstream broker as the upstream advertises it.
type Broker struct {
	NodeID int32
	Host   string
	Port   int32
	Rack   *string
}

// Addr is the broker's real address, for the gateway's own connections only.
func (b Broker) Addr() string { return net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))) }

// Topic is one upstream topic.
type Topic struct {
	Name       string
	ID         [16]byte
	Partitions int32
	Internal   bool
}

// View is one consistent picture of the upstream cluster.
type View struct {
	ClusterID string
	Brokers   []Broker // sorted by node id
	Topics    []Topic  // sorted by name
	// Versions is each broker's ApiVersions answer, by node id (missing while unknown).
	Versions map[int32]*kmsg.ApiVersionsResponse
	// VersionsFetched is when Versions were last asked for.
	VersionsFetched time.Time
	Fetched         time.Time
}

// topic looks a topic up by name; a nil view has none.
func (v *View) topic(name string) (Topic, bool) {
	if v == nil {
		return Topic{}, false
	}
	i := sort.Search(len(v.Topics), func(i int) bool { return v.Topics[i].Name >= name })
	if i < len(v.Topics) && v.Topics[i].Name == name {
		return v.Topics[i], true
	}
	return Topic{}, false
}

// TopicID is the id of the topic with this name, if the view has it.
func (v *View) TopicID(name string) ([16]byte, bool) {
	t, ok := v.topic(name)
	return t.ID, ok
}

// Broker looks a broker up by node id.
func (v *View) Broker(id int32) (Broker, bool) {
	i := sort.Search(len(v.Brokers), func(i int) bool { return v.Brokers[i].NodeID >= id })
	if i < len(v.Brokers) && v.Brokers[i].NodeID == id {
		return v.Brokers[i], true
	}
	return Broker{}, false
}

// Options configure a Client.
type Options struct {
	Bootstrap      []string
	ClientID       string
	RequestTimeout time.Duration
	ConnectTimeout time.Duration
	MaxAge         time.Duration
	// Security secures coordinatord's own connections (TLS, its SASL login).
	Security Security
	Logger   *zap.Logger
	// OnView is called (from the refresh goroutine) with every new view, before Current
	// returns it; the gateway binds listeners for new brokers there.
	OnView func(*View)
}

// Client keeps the upstream view fresh.
type Client struct {
	opts Options
	kc   *kgo.Client
	lg   *zap.Logger
	// fetching serializes fetches, so views are published in the order they were taken.
	fetching sync.Mutex

	mu      sync.Mutex
	view    *View
	refresh chan struct{}
	stop    chan struct{}
	done    chan struct{}
	// loopCtx is cancelled by Close: a refresh in flight stops waiting for the upstream.
	loopCtx    context.Context
	cancelLoop context.CancelFunc
	looping    atomic.Bool // Start started loop: Close waits for it
}

// New creates the client; Start reaches the upstream.
func New(opts Options) (*Client, error) {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	kopts := []kgo.Opt{
		kgo.SeedBrokers(opts.Bootstrap...),
		kgo.ClientID(opts.ClientID),
		kgo.RequestTimeoutOverhead(opts.RequestTimeout),
		kgo.DialTimeout(opts.ConnectTimeout),
	}
	if opts.Security.TLS != nil {
		// kgo sets the ServerName per broker when the config leaves it empty.
		kopts = append(kopts, kgo.DialTLSConfig(opts.Security.TLS.Clone()))
	}
	if opts.Security.SASL != nil {
		kopts = append(kopts, kgo.SASL(opts.Security.SASL))
	}
	kc, err := kgo.NewClient(kopts...)
	if err != nil {
		return nil, err
	}
	loopCtx, cancelLoop := context.WithCancel(context.Background())
	return &Client{opts: opts, kc: kc, lg: opts.Logger, refresh: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		loopCtx: loopCtx, cancelLoop: cancelLoop}, nil
}

// Start fetches the first view, retrying with a progress log until timeout, then refreshes
// every MaxAge (or at once on Refresh) until Close.
func (c *Client) Start(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	backoff := 250 * time.Millisecond
	for attempt := 1; ; attempt++ {
		// Each attempt ends with the start-up deadline: kgo retries a request internally for far
		// longer than a start-up may take.
		actx, cancel := context.WithDeadline(ctx, deadline)
		err := c.fetch(actx)
		cancel()
		if err == nil {
			break
		}
		// An upstream that refuses us (authentication, authorization, versions) refuses
		// again: say so now rather than after the whole start-up timeout.
		if kerrclass.OfError(kmsg.Metadata.Int16(), err).Action() == kerrclass.Stop {
			return fmt.Errorf("upstream %v refused coordinatord: %w", c.opts.Bootstrap, err)
		}
		if time.Now().Add(backoff).After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("upstream %v not reachable after %d attempts: %w", c.opts.Bootstrap, attempt, err)
		}
		c.lg.Warn("upstream not reachable yet; retrying", zap.Strings("upstream.bootstrap.servers", c.opts.Bootstrap),
			zap.Int("attempt", attempt), zap.Duration("retry_in", backoff), zap.Error(err))
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return ctx.Err()
		}
		backoff = min(2*backoff, 5*time.Second)
	}
	c.looping.Store(true)
	go c.loop()
	return nil
}

func (c *Client) loop() {
	defer close(c.done)
	t := time.NewTicker(c.opts.MaxAge)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		case <-c.refresh:
		}
		ctx, cancel := context.WithTimeout(c.loopCtx, c.opts.RequestTimeout)
		if err := c.fetch(ctx); err != nil {
			c.lg.Warn("upstream metadata refresh failed; keeping the previous view", zap.Error(err))
		}
		cancel()
	}
}

// Refresh asks for a new view soon (a request named a topic or broker the view lacks).
func (c *Client) Refresh() {
	select {
	case c.refresh <- struct{}{}:
	default:
	}
}

// RefreshUntil fetches views until done accepts one or ctx ends: a topic just created or
// deleted through the gateway reaches the upstream's metadata a moment after the answer.
func (c *Client) RefreshUntil(ctx context.Context, done func(*View) bool) error {
	for {
		if err := c.fetch(ctx); err != nil {
			return err
		}
		if done(c.Current()) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Current is the latest view (nil before Start succeeded).
func (c *Client) Current() *View {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.view
}

// Close stops refreshing and closes the upstream connections. It returns once no refresh runs
// any more, OnView included: the caller closes what OnView writes to (the catalog) next.
func (c *Client) Close() {
	select {
	case <-c.stop:
	default:
		close(c.stop)
		c.cancelLoop()
		if c.looping.Load() {
			<-c.done
		}
	}
	c.kc.Close()
}

func (c *Client) fetch(ctx context.Context) error {
	c.fetching.Lock()
	defer c.fetching.Unlock()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = nil // all topics
	resp, err := req.RequestWith(ctx, c.kc)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("upstream metadata: %w", err)
	}
	if len(resp.Brokers) == 0 {
		return errors.New("upstream metadata lists no brokers")
	}
	v := &View{Fetched: time.Now(), Versions: map[int32]*kmsg.ApiVersionsResponse{}}
	if resp.ClusterID != nil {
		v.ClusterID = *resp.ClusterID
	}
	for _, b := range resp.Brokers {
		v.Brokers = append(v.Brokers, Broker{NodeID: b.NodeID, Host: b.Host, Port: b.Port, Rack: b.Rack})
	}
	sort.Slice(v.Brokers, func(i, j int) bool { return v.Brokers[i].NodeID < v.Brokers[j].NodeID })
	prev := c.Current()
	var unsettled []string
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		if t.ErrorCode != 0 {
			// A topic the upstream cannot describe right now (a retriable code) still
			// exists: the view keeps what the last one knew of it, since a topic missing
			// from a view is a deleted topic to the catalog, offsets and all.
			if kerrclass.IsRetriable(kmsg.Metadata.Int16(), t.ErrorCode) {
				unsettled = append(unsettled, *t.Topic)
				if old, ok := prev.topic(*t.Topic); ok {
					v.Topics = append(v.Topics, old)
				}
			}
			continue
		}
		v.Topics = append(v.Topics, Topic{Name: *t.Topic, ID: t.TopicID, Partitions: int32(len(t.Partitions)), Internal: t.IsInternal})
	}
	sort.Slice(v.Topics, func(i, j int) bool { return v.Topics[i].Name < v.Topics[j].Name })
	if len(unsettled) > 0 {
		// The next regular look settles them; looking at once could loop on the upstream.
		c.lg.Debug("upstream cannot describe topics right now; keeping their last known state", zap.Strings("topics", unsettled))
	}
	// ApiVersions are asked at most once per max age, not on every look at the metadata (a
	// topic change polls the metadata every 50 ms): finalized features (transaction.version)
	// and their epoch change while brokers run, but not that fast. A broker first seen, or
	// one that does not answer, is asked again at the next look.
	v.VersionsFetched = time.Now()
	askAll := prev == nil || time.Since(prev.VersionsFetched) >= c.opts.MaxAge
	if !askAll {
		v.VersionsFetched = prev.VersionsFetched
	}
	for _, b := range v.Brokers {
		if prev != nil && prev.Versions[b.NodeID] != nil {
			v.Versions[b.NodeID] = prev.Versions[b.NodeID]
			if !askAll {
				continue
			}
		}
		avReq := kmsg.NewPtrApiVersionsRequest()
		avReq.ClientSoftwareName, avReq.ClientSoftwareVersion = "coordinatord", "1"
		av, err := avReq.RequestWith(ctx, c.kc.Broker(int(b.NodeID)))
		if err != nil {
			c.lg.Warn("upstream broker did not answer ApiVersions", zap.Int32("node_id", b.NodeID), zap.Error(err))
			continue
		}
		if err := kerr.ErrorForCode(av.ErrorCode); err != nil {
			c.lg.Warn("upstream broker refused ApiVersions", zap.Int32("node_id", b.NodeID), zap.Error(err))
			continue
		}
		v.Versions[b.NodeID] = av
	}
	if c.opts.OnView != nil {
		c.opts.OnView(v)
	}
	c.mu.Lock()
	c.view = v
	c.mu.Unlock()
	return nil
}

// NewTopic is a topic to create upstream.
type NewTopic struct {
	Name              string
	Partitions        int32 // -1: the upstream's default
	ReplicationFactor int16 // -1: the upstream's default
	Configs           map[string]*string
}

// TopicResult is the upstream's answer for one topic.
type TopicResult struct {
	Name    string
	Code    int16
	Message string
}

// topicsVisibleWait bounds how long CreateTopics waits for created topics to show in metadata.
const topicsVisibleWait = 5 * time.Second

// createAttempts bounds how often CreateTopics asks again for the topics the upstream answered
// with a retriable code (a controller moving, a creation quota, a timeout).
const createAttempts = 3

// CreateTopics creates topics in the upstream cluster (Streams internal topics: a Streams
// client never creates them under the streams protocol) and returns once the view, and so the
// catalog, shows the ones that exist now. Topics refused with a retriable code are asked for
// again, a bounded number of times; a creation that timed out but happened comes back as
// TOPIC_ALREADY_EXISTS, which counts as created.
func (c *Client) CreateTopics(ctx context.Context, topics []NewTopic) ([]TopicResult, error) {
	byName := make(map[string]TopicResult, len(topics))
	pending := topics
	for attempt := 1; len(pending) > 0; attempt++ {
		resp, err := c.createOnce(ctx, pending)
		if err != nil {
			if attempt == 1 {
				return nil, err
			}
			break // the pending topics keep their last (retriable) answer
		}
		var again []NewTopic
		for _, t := range resp.Topics {
			r := TopicResult{Name: t.Topic, Code: t.ErrorCode}
			if t.ErrorMessage != nil {
				r.Message = *t.ErrorMessage
			}
			byName[t.Topic] = r
			if attempt < createAttempts && kerrclass.IsRetriable(kmsg.CreateTopics.Int16(), t.ErrorCode) {
				for _, nt := range pending {
					if nt.Name == t.Topic {
						again = append(again, nt)
					}
				}
			}
		}
		if len(again) == 0 {
			break
		}
		c.lg.Info("upstream refused topic creation for now; asking again", zap.Int("topics", len(again)), zap.Int("attempt", attempt))
		select {
		case <-ctx.Done():
			again = nil
		case <-time.After(time.Duration(attempt) * 100 * time.Millisecond):
		}
		pending = again
	}
	out := make([]TopicResult, 0, len(byName))
	want := map[string]bool{}
	seen := map[string]bool{}
	for _, t := range topics {
		r, ok := byName[t.Name]
		if !ok || seen[t.Name] {
			continue
		}
		seen[t.Name] = true
		out = append(out, r)
		if r.Code == 0 || r.Code == kerr.TopicAlreadyExists.Code {
			want[r.Name] = true
		}
	}
	if len(want) > 0 {
		wctx, cancel := context.WithTimeout(ctx, topicsVisibleWait)
		defer cancel()
		err := c.RefreshUntil(wctx, func(v *View) bool {
			n := 0
			for _, t := range v.Topics {
				if want[t.Name] {
					n++
				}
			}
			return n == len(want)
		})
		if err != nil {
			c.lg.Warn("created topics did not show in the upstream's metadata in time", zap.Error(err))
		}
	}
	return out, nil
}

func (c *Client) createOnce(ctx context.Context, topics []NewTopic) (*kmsg.CreateTopicsResponse, error) {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = int32(c.opts.RequestTimeout.Milliseconds())
	for _, t := range topics {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = t.Name, t.Partitions, t.ReplicationFactor
		for k, v := range t.Configs {
			rc := kmsg.NewCreateTopicsRequestTopicConfig()
			rc.Name, rc.Value = k, v
			rt.Configs = append(rt.Configs, rc)
		}
		req.Topics = append(req.Topics, rt)
	}
	return req.RequestWith(ctx, c.kc)
}

// Request sends req with coordinatord's upstream client: group requests go to the group's
// coordinator, with kgo's retries of a moved or loading coordinator.
func (c *Client) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	return c.kc.Request(ctx, req)
}
