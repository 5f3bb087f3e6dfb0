package upstream

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/coordinatord/coordinatord/internal/wire/wiretest"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeBroker is a one-broker cluster (node 1) that answers ApiVersions and Metadata only,
// counting the ApiVersions it is asked in apiVersions (when not nil).
func fakeBroker(t *testing.T, apiVersions ...*atomic.Int32) string {
	t.Helper()
	var a fakeAnswers
	if len(apiVersions) > 0 {
		a.apiVersions = apiVersions[0]
	}
	return fakeBrokerWith(t, a)
}

// fakeAnswers shape what fakeBrokerWith answers.
type fakeAnswers struct {
	apiVersions     *atomic.Int32 // counts ApiVersions requests
	apiVersionsCode int16         // ApiVersions' error code
	// topics are Metadata's topics (none when nil).
	topics func() []kmsg.MetadataResponseTopic
	// createTopics answers CreateTopics (the broker closes the connection when nil).
	createTopics func(*kmsg.CreateTopicsRequest) *kmsg.CreateTopicsResponse
	// describeTxn answers DescribeTransactions for one id (FindCoordinator names node 1).
	describeTxn func(id string) kmsg.DescribeTransactionsResponseTransactionState
	// listOffsets answers ListOffsets (the broker closes the connection when nil).
	listOffsets func(*kmsg.ListOffsetsRequest) *kmsg.ListOffsetsResponse
	// describeTxnNone answers DescribeTransactions with no transaction at all.
	describeTxnNone bool
	// withoutDescribeTxn leaves DescribeTransactions out of ApiVersions (Kafka before 3.0).
	withoutDescribeTxn bool
	// describeTxnHeld never answers DescribeTransactions: the connection stays open and silent
	// until the test ends, as a transaction coordinator that hangs.
	describeTxnHeld bool
	// brokers are the node ids Metadata lists, in this order (node 1 alone when nil); only
	// node 1 is this broker, the others' addresses refuse connections.
	brokers func() []int32
}

func fakeBrokerWith(t *testing.T, a fakeAnswers) string {
	t.Helper()
	s := wiretest.Listen(t)
	addr := s.Addr
	held := make(chan struct{})
	t.Cleanup(func() { close(held) })
	s.Start(func(h wire.Header, body []byte) kmsg.Response {
		switch h.Key {
		case 18:
			if a.apiVersions != nil {
				a.apiVersions.Add(1)
			}
			r := kmsg.NewPtrApiVersionsResponse()
			r.ErrorCode = a.apiVersionsCode
			for _, k := range [][3]int16{{3, 0, 12}, {18, 0, 3}, {19, 0, 4}, {10, 0, 3}, {65, 0, 0}, {2, 0, 5}} {
				if k[0] == 65 && a.withoutDescribeTxn {
					continue
				}
				ak := kmsg.NewApiVersionsResponseApiKey()
				ak.ApiKey, ak.MinVersion, ak.MaxVersion = k[0], k[1], k[2]
				r.ApiKeys = append(r.ApiKeys, ak)
			}
			return r
		case 3:
			r := kmsg.NewPtrMetadataResponse()
			ids := []int32{1}
			if a.brokers != nil {
				ids = a.brokers()
			}
			for _, id := range ids {
				b := kmsg.NewMetadataResponseBroker()
				b.NodeID, b.Host, b.Port = id, "127.0.0.1", int32(addr.Port)
				if id != 1 {
					b.Port = int32(closedPort(t))
				}
				r.Brokers = append(r.Brokers, b)
			}
			r.ControllerID = 1
			if a.topics != nil {
				r.Topics = a.topics()
			}
			return r
		case 19:
			req := kmsg.NewPtrCreateTopicsRequest()
			if a.createTopics == nil || !wiretest.Request(h, body, req) {
				return nil
			}
			return a.createTopics(req)
		case 2:
			req := kmsg.NewPtrListOffsetsRequest()
			if a.listOffsets == nil || !wiretest.Request(h, body, req) {
				return nil
			}
			return a.listOffsets(req)
		case 10:
			r := kmsg.NewPtrFindCoordinatorResponse()
			r.NodeID, r.Host, r.Port = 1, "127.0.0.1", int32(addr.Port)
			return r
		case 65:
			if a.describeTxnHeld {
				<-held
				return nil
			}
			req := kmsg.NewPtrDescribeTransactionsRequest()
			if a.describeTxn == nil && !a.describeTxnNone || !wiretest.Request(h, body, req) {
				return nil
			}
			r := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
			for _, id := range req.TransactionalIDs {
				if a.describeTxnNone {
					break
				}
				st := a.describeTxn(id)
				st.TransactionalID = id
				r.TransactionStates = append(r.TransactionStates, st)
			}
			return r
		}
		return nil
	})
	return addr.String()
}

// closedPort is a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Close returns only once no view is being applied any more: coordinatord closes the catalog
// that OnView writes to right after, so a refresh still running would write into closed state.
func TestCloseWaitsForAViewBeingApplied(t *testing.T) {
	var views atomic.Int32
	var applying atomic.Bool
	entered, release := make(chan struct{}), make(chan struct{})
	c, err := New(Options{
		Bootstrap: []string{fakeBroker(t)}, RequestTimeout: 100 * time.Millisecond, ConnectTimeout: time.Second, MaxAge: time.Hour,
		OnView: func(*View) {
			if views.Add(1) == 2 { // the first refresh after Start
				applying.Store(true)
				close(entered)
				<-release
				applying.Store(false)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	c.Refresh()
	<-entered
	go func() {
		time.Sleep(500 * time.Millisecond) // well past RequestTimeout
		close(release)
	}()
	c.Close()
	if applying.Load() {
		t.Fatal("Close returned while OnView was still applying a view")
	}
}

// Looking at the metadata again and again (a topic change polls it) asks the brokers'
// ApiVersions only once per max age, not at every look.
func TestApiVersionsAskedOncePerMaxAge(t *testing.T) {
	var asked atomic.Int32
	c, err := New(Options{Bootstrap: []string{fakeBroker(t, &asked)}, RequestTimeout: time.Second, ConnectTimeout: time.Second, MaxAge: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Start(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	afterStart := asked.Load() // the client's own handshakes and the first view's question
	looks := 0
	if err := c.RefreshUntil(context.Background(), func(*View) bool { looks++; return looks == 5 }); err != nil {
		t.Fatal(err)
	}
	if n := asked.Load() - afterStart; n != 0 {
		t.Fatalf("ApiVersions asked %d more times over 5 more looks at the metadata within the max age, want none", n)
	}
	if c.Current().Versions[1] == nil {
		t.Fatal("the broker's versions were dropped from later views")
	}
}

func metadataTopic(name string, id byte, code int16) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic, mt.TopicID, mt.ErrorCode = &name, [16]byte{id}, code
	mt.Partitions = append(mt.Partitions, kmsg.NewMetadataResponseTopicPartition())
	return mt
}

// A topic the upstream cannot describe for a moment (a retriable code such as
// LEADER_NOT_AVAILABLE) stays in the view as last seen: a topic missing from a view is deleted
// from the catalog, and its committed offsets with it.
func TestRetriableTopicErrorKeepsTheTopic(t *testing.T) {
	var code atomic.Int32
	c, err := New(Options{
		Bootstrap: []string{fakeBrokerWith(t, fakeAnswers{topics: func() []kmsg.MetadataResponseTopic {
			return []kmsg.MetadataResponseTopic{metadataTopic("a", 1, int16(code.Load())), metadataTopic("b", 2, 0)}
		}})},
		RequestTimeout: time.Second, ConnectTimeout: time.Second, MaxAge: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Start(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	names := func() []string {
		var out []string
		for _, tp := range c.Current().Topics {
			out = append(out, tp.Name)
		}
		return out
	}
	if got := names(); len(got) != 2 {
		t.Fatalf("first view: %v, want a and b", got)
	}
	for _, tc := range []struct {
		code int16
		want int
	}{
		{kerr.LeaderNotAvailable.Code, 2},       // retriable: a is still there
		{kerr.UnknownTopicOrPartition.Code, 2},  // refresh-retriable: likewise
		{kerr.TopicAuthorizationFailed.Code, 1}, // not retriable: the topic is not ours to see
	} {
		code.Store(int32(tc.code))
		if err := c.RefreshUntil(context.Background(), func(*View) bool { return true }); err != nil {
			t.Fatal(err)
		}
		if got := names(); len(got) != tc.want {
			t.Errorf("topic a answered with code %d: view has %v, want %d topics", tc.code, got, tc.want)
		}
		code.Store(0)
		if err := c.RefreshUntil(context.Background(), func(*View) bool { return true }); err != nil {
			t.Fatal(err)
		}
	}
}

// An upstream that refuses coordinatord (here: its ApiVersions answer is
// CLUSTER_AUTHORIZATION_FAILED, an invalid-configuration code) fails Start at the first
// attempt instead of being retried until the start-up timeout.
func TestStartGivesUpOnInvalidConfiguration(t *testing.T) {
	var asked atomic.Int32
	c, err := New(Options{
		Bootstrap:      []string{fakeBrokerWith(t, fakeAnswers{apiVersions: &asked, apiVersionsCode: kerr.ClusterAuthorizationFailed.Code})},
		RequestTimeout: time.Second, ConnectTimeout: time.Second, MaxAge: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = c.Start(context.Background(), 20*time.Second)
	if !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("Start: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
	if n := asked.Load(); n != 1 {
		t.Fatalf("the upstream was asked %d times, want once", n)
	}
}

// A topic creation the upstream answers with a retriable code (a timeout: the controller did
// not finish in time) is asked for again; a non-retriable refusal is answered as it is.
func TestCreateTopicsRetriesRetriableCodes(t *testing.T) {
	var asked atomic.Int32
	c, err := New(Options{
		Bootstrap: []string{fakeBrokerWith(t, fakeAnswers{
			topics: func() []kmsg.MetadataResponseTopic {
				if asked.Load() >= 2 {
					return []kmsg.MetadataResponseTopic{metadataTopic("t", 1, 0)}
				}
				return nil
			},
			createTopics: func(req *kmsg.CreateTopicsRequest) *kmsg.CreateTopicsResponse {
				n := asked.Add(1)
				resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
				for _, rt := range req.Topics {
					st := kmsg.NewCreateTopicsResponseTopic()
					st.Topic = rt.Topic
					switch {
					case rt.Topic == "bad":
						st.ErrorCode = kerr.InvalidReplicationFactor.Code
					case n == 1:
						st.ErrorCode = kerr.RequestTimedOut.Code
					}
					resp.Topics = append(resp.Topics, st)
				}
				return resp
			},
		})},
		RequestTimeout: time.Second, ConnectTimeout: time.Second, MaxAge: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Start(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	res, err := c.CreateTopics(context.Background(), []NewTopic{{Name: "t", Partitions: 1, ReplicationFactor: 1}, {Name: "bad", Partitions: 1, ReplicationFactor: 9}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int16{}
	for _, r := range res {
		got[r.Name] = r.Code
	}
	if got["t"] != 0 || got["bad"] != kerr.InvalidReplicationFactor.Code || len(res) != 2 {
		t.Fatalf("results %v, want t created and bad refused with INVALID_REPLICATION_FACTOR", res)
	}
	if n := asked.Load(); n != 2 {
		t.Fatalf("CreateTopics asked %d times, want 2 (one retry of t)", n)
	}
}

// VerifyTxnOffsets answers what Kafka's KIP-890 verification answers the group coordinator,
// from the upstream's description of the transaction.
func TestVerifyTxnOffsets(t *testing.T) {
	offsets := func(ps ...int32) []kmsg.DescribeTransactionsResponseTransactionStateTopic {
		tp := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
		tp.Topic, tp.Partitions = "__consumer_offsets", ps
		return []kmsg.DescribeTransactionsResponseTransactionStateTopic{tp}
	}
	var current atomic.Pointer[kmsg.DescribeTransactionsResponseTransactionState]
	c, err := New(Options{
		Bootstrap: []string{fakeBrokerWith(t, fakeAnswers{describeTxn: func(string) kmsg.DescribeTransactionsResponseTransactionState {
			return *current.Load()
		}})},
		RequestTimeout: 300 * time.Millisecond, ConnectTimeout: time.Second, MaxAge: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Start(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	ongoing := func(pid int64, epoch int16, state string, topics []kmsg.DescribeTransactionsResponseTransactionStateTopic) kmsg.DescribeTransactionsResponseTransactionState {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.ProducerID, st.ProducerEpoch, st.State, st.Topics = pid, epoch, state, topics
		return st
	}
	failed := func(code int16) kmsg.DescribeTransactionsResponseTransactionState {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.ErrorCode = code
		return st
	}
	for _, tc := range []struct {
		name  string
		state kmsg.DescribeTransactionsResponseTransactionState
		want  int16
	}{
		{"ongoing with the group's partition", ongoing(7, 3, "Ongoing", offsets(1, 12)), 0},
		{"ongoing without it", ongoing(7, 3, "Ongoing", offsets(1)), kerr.TransactionAbortable.Code},
		{"no transaction", ongoing(7, 3, "Empty", nil), kerr.TransactionAbortable.Code},
		{"ended", ongoing(7, 3, "CompleteCommit", nil), kerr.TransactionAbortable.Code},
		{"another producer id", ongoing(8, 3, "Ongoing", offsets(12)), kerr.InvalidProducerIDMapping.Code},
		{"fenced", ongoing(7, 4, "Ongoing", offsets(12)), kerr.InvalidProducerEpoch.Code},
		{"completing", ongoing(7, 3, "PrepareCommit", offsets(12)), kerr.ConcurrentTransactions.Code},
		{"aborting", ongoing(7, 3, "PrepareAbort", offsets(12)), kerr.ConcurrentTransactions.Code},
		{"the partition number in another topic", ongoing(7, 3, "Ongoing", func() []kmsg.DescribeTransactionsResponseTransactionStateTopic {
			tp := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
			tp.Topic, tp.Partitions = "orders", []int32{12}
			return []kmsg.DescribeTransactionsResponseTransactionStateTopic{tp}
		}()), kerr.TransactionAbortable.Code},
		{"unknown transactional id", failed(kerr.TransactionalIDNotFound.Code), kerr.InvalidProducerIDMapping.Code},
		{"not allowed to describe", failed(kerr.TransactionalIDAuthorizationFailed.Code), kerr.InvalidTxnState.Code},
		{"coordinator keeps loading", failed(kerr.CoordinatorLoadInProgress.Code), kerr.CoordinatorLoadInProgress.Code},
	} {
		current.Store(&tc.state)
		got := c.VerifyTxnOffsets(context.Background(), TxnOffsetsCheck{TransactionalID: "tx", ProducerID: 7, ProducerEpoch: 3, OffsetsPartition: 12})
		if got != tc.want {
			t.Errorf("%s: code %d, want %d", tc.name, got, tc.want)
		}
	}
	// The upstream's numbering unknown: any offsets partition of the transaction verifies it,
	// none does not (nor the offsets topic listed without partitions).
	for st, want := range map[*kmsg.DescribeTransactionsResponseTransactionState]int16{
		ptr(ongoing(7, 3, "Ongoing", offsets(4))): 0,
		ptr(ongoing(7, 3, "Ongoing", nil)):        kerr.TransactionAbortable.Code,
		ptr(ongoing(7, 3, "Ongoing", offsets())):  kerr.TransactionAbortable.Code,
	} {
		current.Store(st)
		if got := c.VerifyTxnOffsets(context.Background(), TxnOffsetsCheck{TransactionalID: "tx", ProducerID: 7, ProducerEpoch: 3, OffsetsPartition: -1}); got != want {
			t.Errorf("partition unknown, topics %v: code %d, want %d", st.Topics, got, want)
		}
	}
	// Partition 0 is a partition like any other, not "unknown".
	for st, want := range map[*kmsg.DescribeTransactionsResponseTransactionState]int16{
		ptr(ongoing(7, 3, "Ongoing", offsets(0))): 0,
		ptr(ongoing(7, 3, "Ongoing", offsets(4))): kerr.TransactionAbortable.Code,
	} {
		current.Store(st)
		if got := c.VerifyTxnOffsets(context.Background(), TxnOffsetsCheck{TransactionalID: "tx", ProducerID: 7, ProducerEpoch: 3, OffsetsPartition: 0}); got != want {
			t.Errorf("partition 0, transaction holds %v: code %d, want %d", st.Topics[0].Partitions, got, want)
		}
	}
}

// An upstream that cannot describe transactions (Kafka before 3.0: DescribeTransactions is not
// in its ApiVersions, so the client refuses to send it, or it answers UNSUPPORTED_VERSION)
// cannot verify anything: commits are staged unverified, as standalone, not answered
// COORDINATOR_LOAD_IN_PROGRESS for ever, which would leave every transactional producer retrying
// until its transaction timed out.
func TestVerifyTxnOffsetsSkippedWhenTheUpstreamCannotDescribe(t *testing.T) {
	for name, a := range map[string]fakeAnswers{
		"not advertised": {withoutDescribeTxn: true},
		"UNSUPPORTED_VERSION": {describeTxn: func(string) kmsg.DescribeTransactionsResponseTransactionState {
			st := kmsg.NewDescribeTransactionsResponseTransactionState()
			st.ErrorCode = kerr.UnsupportedVersion.Code
			return st
		}},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := New(Options{Bootstrap: []string{fakeBrokerWith(t, a)}, RequestTimeout: 300 * time.Millisecond, ConnectTimeout: time.Second, MaxAge: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := c.Start(context.Background(), 10*time.Second); err != nil {
				t.Fatal(err)
			}
			if got := c.VerifyTxnOffsets(context.Background(), TxnOffsetsCheck{TransactionalID: "tx", ProducerID: 7, ProducerEpoch: 3, OffsetsPartition: 12}); got != 0 {
				t.Fatalf("code %d, want 0 (verification skipped)", got)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// The console's lag in gateway mode: log end offsets come from the upstream's ListOffsets
// (latest), and a partition it answers with an error is left out rather than failing the rest.
func TestLogEndListsLatestOffsets(t *testing.T) {
	topics := func() []kmsg.MetadataResponseTopic {
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic = kmsg.StringPtr("words")
		for p := int32(0); p < 4; p++ {
			mp := kmsg.NewMetadataResponseTopicPartition()
			mp.Partition, mp.Leader, mp.Replicas, mp.ISR = p, 1, []int32{1}, []int32{1}
			mt.Partitions = append(mt.Partitions, mp)
		}
		return []kmsg.MetadataResponseTopic{mt}
	}
	var asked atomic.Int32
	c, err := New(Options{
		Bootstrap: []string{fakeBrokerWith(t, fakeAnswers{topics: topics, listOffsets: func(req *kmsg.ListOffsetsRequest) *kmsg.ListOffsetsResponse {
			asked.Add(1)
			r := req.ResponseKind().(*kmsg.ListOffsetsResponse)
			for _, rt := range req.Topics {
				t := kmsg.NewListOffsetsResponseTopic()
				t.Topic = rt.Topic
				for _, rp := range rt.Partitions {
					p := kmsg.NewListOffsetsResponseTopicPartition()
					p.Partition, p.Offset = rp.Partition, 100+int64(rp.Partition)
					if rp.Timestamp != -1 {
						p.Offset = 0 // not the latest offset: the lag would be wrong
					}
					switch rp.Partition {
					case 2:
						p.ErrorCode, p.Offset = kerr.TopicAuthorizationFailed.Code, -1
					case 3:
						p.Offset = -1 // no offset known, without an error
					}
					t.Partitions = append(t.Partitions, p)
				}
				r.Topics = append(r.Topics, t)
			}
			return r
		}})},
		RequestTimeout: 300 * time.Millisecond, ConnectTimeout: time.Second, MaxAge: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Start(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := c.LogEnd(ctx, map[string][]int32{"words": {0, 1, 2, 3}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || len(got["words"]) != 2 || got["words"][0] != 100 || got["words"][1] != 101 {
		t.Fatalf("LogEnd = %v, want words 0:100 1:101 and no entry for the partitions answered with an error or no offset (a lag from -1 would be negative)", got)
	}
	if asked.Load() == 0 {
		t.Fatal("the upstream was not asked")
	}
}

// Past the max age the brokers' ApiVersions are asked again: a finalized feature the upstream
// changes while coordinatord runs (transaction.version, say) reaches the clients.
func TestApiVersionsAskedAgainAfterTheMaxAge(t *testing.T) {
	var asked atomic.Int32
	c, err := New(Options{Bootstrap: []string{fakeBroker(t, &asked)}, RequestTimeout: time.Second, ConnectTimeout: time.Second, MaxAge: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Start(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	afterStart := asked.Load()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.RefreshUntil(ctx, func(*View) bool { return asked.Load() > afterStart }); err != nil {
		t.Fatalf("ApiVersions never asked again past the max age: %v", err)
	}
}

// Kafka does not promise its Metadata lists brokers in node id order; the view sorts them, or
// looking a broker up by id (every forward does) misses brokers that are there.
func TestViewFindsEveryBrokerWhateverTheMetadataOrder(t *testing.T) {
	c, err := New(Options{Bootstrap: []string{fakeBrokerWith(t, fakeAnswers{brokers: func() []int32 { return []int32{5, 1, 3} }})},
		RequestTimeout: time.Second, ConnectTimeout: time.Second, MaxAge: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Start(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	v := c.Current()
	for _, id := range []int32{1, 3, 5} {
		if b, ok := v.Broker(id); !ok || b.NodeID != id {
			t.Errorf("broker %d not found in the view (brokers %+v)", id, v.Brokers)
		}
	}
	if _, ok := v.Broker(2); ok {
		t.Error("broker 2, which the metadata does not list, found")
	}
}

// A Metadata answer listing no brokers (an upstream in trouble) is not a view: the previous
// one stays, or every broker port would lose its broker and every forward fail.
func TestMetadataWithoutBrokersKeepsThePreviousView(t *testing.T) {
	var none atomic.Bool
	c, err := New(Options{Bootstrap: []string{fakeBrokerWith(t, fakeAnswers{brokers: func() []int32 {
		if none.Load() {
			return nil
		}
		return []int32{1}
	}})}, RequestTimeout: time.Second, ConnectTimeout: time.Second, MaxAge: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Start(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	none.Store(true)
	if err := c.RefreshUntil(context.Background(), func(*View) bool { return true }); err == nil {
		t.Error("a Metadata answer without brokers was taken as a view")
	}
	if v := c.Current(); len(v.Brokers) != 1 {
		t.Fatalf("view after an answer without brokers: %+v, want the previous one", v.Brokers)
	}
}

// A topic the upstream answers TOPIC_ALREADY_EXISTS (a creation that timed out but happened,
// or a Streams application's second instance) counts as created: CreateTopics returns once
// the view shows it, so the catalog knows it when the caller goes on.
func TestCreateTopicsWaitsForTopicsThatAlreadyExist(t *testing.T) {
	var created atomic.Bool
	c, err := New(Options{
		Bootstrap: []string{fakeBrokerWith(t, fakeAnswers{
			topics: func() []kmsg.MetadataResponseTopic {
				if created.Load() {
					return []kmsg.MetadataResponseTopic{metadataTopic("t", 1, 0)}
				}
				return nil
			},
			createTopics: func(req *kmsg.CreateTopicsRequest) *kmsg.CreateTopicsResponse {
				created.Store(true)
				resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
				st := kmsg.NewCreateTopicsResponseTopic()
				st.Topic, st.ErrorCode = "t", kerr.TopicAlreadyExists.Code
				resp.Topics = append(resp.Topics, st)
				return resp
			},
		})},
		RequestTimeout: time.Second, ConnectTimeout: time.Second, MaxAge: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Start(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTopics(context.Background(), []NewTopic{{Name: "t", Partitions: 1, ReplicationFactor: 1}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Current().topic("t"); !ok {
		t.Fatal("CreateTopics returned before the view showed the topic the upstream already had")
	}
}

// A CreateTopics the upstream never answers fails: the caller (a Streams group's internal
// topics) must learn the topics were not made, not get an empty list of results.
func TestCreateTopicsWithoutAnAnswerFails(t *testing.T) {
	c, err := New(Options{Bootstrap: []string{fakeBroker(t)}, RequestTimeout: 200 * time.Millisecond, ConnectTimeout: time.Second, MaxAge: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Start(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if res, err := c.CreateTopics(ctx, []NewTopic{{Name: "t", Partitions: 1, ReplicationFactor: 1}}); err == nil {
		t.Fatalf("CreateTopics without an answer: results %v and no error", res)
	}
}

// An upstream answering DescribeTransactions without the transaction asked for is an upstream
// that did not answer: the commit is told to retry (COORDINATOR_LOAD_IN_PROGRESS), and nothing
// reads a state that is not there.
func TestVerifyTxnOffsetsWithoutTheTransactionInTheAnswer(t *testing.T) {
	c, err := New(Options{Bootstrap: []string{fakeBrokerWith(t, fakeAnswers{describeTxnNone: true})}, RequestTimeout: 300 * time.Millisecond, ConnectTimeout: time.Second, MaxAge: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Start(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := c.VerifyTxnOffsets(context.Background(), TxnOffsetsCheck{TransactionalID: "tx", ProducerID: 7, ProducerEpoch: 3, OffsetsPartition: 12}); got != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("code %d, want COORDINATOR_LOAD_IN_PROGRESS", got)
	}
}

// A transactional offset commit waits for its verification, and an upstream whose coordinator
// never answers the description holds it no longer than upstream.request.timeout.ms: the commit
// is told to retry (COORDINATOR_LOAD_IN_PROGRESS) then, rather than after the upstream client's
// retries (20 of them, backing off up to 5 s each) or after the producer's own request timeout,
// which a Kafka client takes for a dead connection. The bound asserted is 10 s against 300 ms
// configured: a limit on waiting, not a speed. (Without the bound the verification was still
// waiting at 10 s: kgo sends a request that timed out again, up to 20 times.)
func TestVerifyTxnOffsetsIsBoundedByTheUpstreamRequestTimeout(t *testing.T) {
	c, err := New(Options{Bootstrap: []string{fakeBrokerWith(t, fakeAnswers{describeTxnHeld: true})}, RequestTimeout: 300 * time.Millisecond, ConnectTimeout: time.Second, MaxAge: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Start(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	got := make(chan int16, 1)
	go func() {
		got <- c.VerifyTxnOffsets(context.Background(), TxnOffsetsCheck{TransactionalID: "tx", ProducerID: 7, ProducerEpoch: 3, OffsetsPartition: 12})
	}()
	select {
	case code := <-got:
		if code != kerr.CoordinatorLoadInProgress.Code {
			t.Fatalf("code %d, want COORDINATOR_LOAD_IN_PROGRESS", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("verification against an upstream that never answers still waiting after 10 s, with upstream.request.timeout.ms 300 ms")
	}
}
