// Package handlers is coordinatord's API table: for every Kafka API key it serves, the version
// range and the function that answers it. The table is the single source of ApiVersions, so
// nothing can be advertised that is not implemented. Handlers validate requests, route them and
// map outcomes to the error code each request version understands. One file per API, named by
// its zero-padded key.
package handlers

import (
	"context"
	"sort"

	"github.com/coordinatord/coordinatord/internal/acl"
	"github.com/coordinatord/coordinatord/internal/plugin"
	"github.com/coordinatord/coordinatord/internal/state/classic"
	"github.com/coordinatord/coordinatord/internal/state/consumer"
	"github.com/coordinatord/coordinatord/internal/state/meta"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/coordinatord/coordinatord/internal/state/shard"
	"github.com/coordinatord/coordinatord/internal/state/streams"
	"github.com/coordinatord/coordinatord/internal/state/streams/assign"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// Endpoint is an advertised listener: where clients reach this node.
type Endpoint struct {
	Listener string
	Host     string
	Port     int32
}

// Node is what this process says about itself in Metadata and FindCoordinator.
type Node struct {
	ID        int32
	ClusterID string
	// Endpoints by listener name; a request is answered with the endpoint of the listener it
	// arrived on, as Kafka does, so clients stay on the network they came from.
	Endpoints []Endpoint
}

// PeerNode is a coordinatord node as clients reach it.
type PeerNode struct {
	// Self: the node is this one. Not the same as its id being this node's: a node the
	// shard map left out for using another node's node.id must send clients to that node.
	Self bool
	ID   int32
	Host string
	Port int32
}

// endpointFor picks the advertised endpoint for the listener a request arrived on.
func (n *Node) endpointFor(listener string) Endpoint {
	for _, e := range n.Endpoints {
		if e.Listener == listener {
			return e
		}
	}
	return n.Endpoints[0]
}

// Limits are request limits taken from the configuration.
type Limits struct {
	OffsetMetadataMaxBytes int
	// GroupConfigMaxGroups bounds the group ids with configs on one shard; 0: unbounded.
	GroupConfigMaxGroups int
	// TxnMarkerMaxProducers caps the producer ids a shard remembers from markers alone; 0: unbounded.
	TxnMarkerMaxProducers    int
	DefaultPartitions        int32
	DefaultReplicationFactor int16
}

// Deps are what the handlers need from the rest of the process.
type Deps struct {
	Node Node
	// GroupOwner, when set, says which node owns a group shard (several nodes share the shards,
	// log.backend=kafka): ok false while the shard is being handed over or ownership is not
	// known yet. Nil: this node owns every shard.
	GroupOwner func(shard int32) (owner PeerNode, ok bool)
	Logger     *zap.Logger
	Limits     Limits
	// Meta is the metadata shard (topic catalog).
	Meta *runtime.Shard[*meta.Catalog]
	// Catalog is the catalog's latest durable snapshot, published by the metadata shard
	// (nil: every catalog read is a round trip through Meta).
	Catalog *meta.Published
	// Groups are the group shards.
	Groups *shard.Set
	// Classic is the classic groups' configuration (group.* keys).
	Classic classic.Config
	// Streams is the streams groups' broker-level configuration.
	Streams streams.Config
	// Consumer is the KIP-848 consumer groups' broker-level configuration (group.consumer.*).
	Consumer consumer.Config
	// Topology is the topology description plugin (KIP-1331); nil when none is configured.
	Topology *plugin.Caller
	// CreateTopics creates the internal topics streams topologies need where the data lives:
	// nil creates them in the catalog (standalone); in gateway mode, in the upstream cluster,
	// returning once the catalog shows them. An error is an availability error.
	CreateTopics func(ctx context.Context, topics []meta.NewTopic) ([]meta.TopicResult, error)
	// RefreshCatalog brings the catalog up to date with the cluster now (gateway mode), at most
	// as often as its implementation allows; nil where the catalog is the only truth.
	RefreshCatalog func(ctx context.Context) error
	// BrokerConfigs are this process's effective configuration keys (DescribeConfigs of its
	// BROKER resource; synonyms of group configs), BrokerDefaults their default values.
	BrokerConfigs  []BrokerConfig
	BrokerDefaults map[string]string
	// VerifyTxnOffsets asks the transaction coordinator (in gateway mode, the upstream's)
	// whether a TxnOffsetCommit belongs to an ongoing transaction holding the group's offsets
	// partition (KIP-890 verification): 0, or the code the commit gets. nil: not verified.
	VerifyTxnOffsets func(ctx context.Context, v TxnVerification) int16
	// TxnPeerOutcome applies a transaction outcome that another node of the cluster learned
	// (its EndTxn passed through that node) wherever this node holds the producer's staged
	// offsets, and returns the shards this node answers for, each with its code: a WriteTxnMarkers
	// for __consumer_offsets naming no partition (gateway/txnpeer.go). nil: such a marker
	// answers no partition.
	TxnPeerOutcome func(ctx context.Context, producerID int64, epoch int16, commit bool) map[int32]int16
	// JoinCreatesInternalTopics creates a joining member's missing internal topics before its
	// heartbeat runs (group.streams.join.creates.internal.topics).
	JoinCreatesInternalTopics bool
	// Authorizer checks ACLs; nil or not enabled allows everything (no authorizer.class.name).
	Authorizer *acl.Authorizer
	// SASL serves SaslHandshake and SaslAuthenticate on SASL listeners.
	SASL SASL
}

// TxnVerification is one TxnOffsetCommit to verify with the transaction coordinator.
type TxnVerification struct {
	TransactionalID string
	Group           string
	ProducerID      int64
	ProducerEpoch   int16
}

type handlerFunc func(ctx context.Context, r *wire.Request) kmsg.Response

type api struct {
	key      int16
	min, max int16
	handle   handlerFunc
}

// Table serves the Kafka protocol through wire.Handler.
type Table struct {
	deps Deps
	log  *zap.Logger
	apis map[int16]api
	// byKey holds apis indexed by key (a nil handle: not served), for the lookups every
	// request makes: hashing the key into the map twice per request was 2% of a steady
	// heartbeat's CPU (issue 12).
	byKey []api
	// drops runs the removal of deleted topics' offsets that DeleteTopics starts.
	drops singleFlight
}

// New builds the table of every implemented API.
func New(deps Deps) *Table {
	if deps.Logger == nil {
		deps.Logger = zap.NewNop()
	}
	if deps.Streams.SessionTimeout <= 0 {
		deps.Streams = streams.DefaultConfig()
		deps.Streams.Lookup = assign.Lookup
	}
	if deps.Consumer.SessionTimeout <= 0 {
		deps.Consumer = consumer.DefaultConfig()
	}
	t := &Table{deps: deps, log: deps.Logger, apis: map[int16]api{}}
	deps.Topology.OnLateSet(t.lateDescriptionSet)
	t.add(18, 0, 4, t.apiVersions)
	t.add(3, 0, 13, t.metadata)
	t.add(10, 0, 6, t.findCoordinator)
	t.add(19, 2, 7, t.createTopics)
	t.add(20, 1, 6, t.deleteTopics)
	t.add(37, 0, 3, t.createPartitions)
	t.add(8, 2, 10, t.offsetCommit)
	t.add(9, 1, 10, t.offsetFetch)
	t.add(11, 0, 9, t.joinGroup)
	t.add(12, 0, 4, t.heartbeat)
	t.add(13, 0, 5, t.leaveGroup)
	t.add(14, 0, 5, t.syncGroup)
	t.add(15, 0, 6, t.describeGroups)
	t.add(16, 0, 5, t.listGroups)
	t.add(42, 0, 3, t.deleteGroups)
	t.add(68, 0, 1, t.consumerGroupHeartbeat)
	t.add(69, 0, 1, t.consumerGroupDescribe)
	t.add(88, 0, 1, t.streamsGroupHeartbeat)
	t.add(89, 0, 1, t.streamsGroupDescribe)
	t.add(93, 0, 0, t.streamsGroupTopologyDescriptionUpdate)
	t.add(27, 1, 2, t.writeTxnMarkers)
	t.add(28, 0, 6, t.txnOffsetCommit)
	t.add(47, 0, 0, t.offsetDelete)
	t.add(32, 1, 4, t.describeConfigs)
	t.add(33, 0, 2, t.alterConfigs)
	t.add(44, 0, 1, t.incrementalAlterConfigs)
	t.add(74, 0, 1, t.listConfigResources)
	t.add(17, 0, 1, t.saslHandshake)
	t.add(36, 0, 2, t.saslAuthenticate)
	t.add(48, 0, 1, t.describeClientQuotas)
	t.add(50, 0, 0, t.describeUserScramCredentials)
	t.add(51, 0, 0, t.alterUserScramCredentials)
	t.add(29, 1, 3, t.describeACLs)
	t.add(30, 1, 3, t.createACLs)
	t.add(31, 1, 3, t.deleteACLs)
	return t
}

func (t *Table) add(key, min, max int16, h handlerFunc) {
	if req := kmsg.RequestForKey(key); req == nil || req.MaxVersion() < max {
		panic("handlers: kmsg cannot decode " + kmsg.NameForKey(key) + " up to the advertised version")
	}
	t.apis[key] = api{key: key, min: min, max: max, handle: h}
	if int(key) >= len(t.byKey) {
		t.byKey = append(t.byKey, make([]api, int(key)+1-len(t.byKey))...)
	}
	t.byKey[key] = t.apis[key]
}

// lookup is the API served under key; ok=false when there is none.
func (t *Table) lookup(key int16) (a api, ok bool) {
	if key < 0 || int(key) >= len(t.byKey) || t.byKey[key].handle == nil {
		return api{}, false
	}
	return t.byKey[key], true
}

// Versions lists the advertised (key, min, max) sorted by key: ApiVersions' answer.
func (t *Table) Versions() []kmsg.ApiVersionsResponseApiKey {
	out := make([]kmsg.ApiVersionsResponseApiKey, 0, len(t.apis))
	for _, a := range t.apis {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = a.key, a.min, a.max
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ApiKey < out[j].ApiKey })
	return out
}

// NewRequest implements wire.Handler. Every ApiVersions version is accepted so that a client
// newer than us gets the v0 fallback answer instead of a closed connection (KIP-511); its body
// is only parsed when we know the version's format.
func (t *Table) NewRequest(key, version int16) (kmsg.Request, bool, bool) {
	a, ok := t.lookup(key)
	if !ok {
		return nil, false, false
	}
	inRange := version >= a.min && version <= a.max
	if key == 18 {
		return kmsg.RequestForKey(key), inRange, true
	}
	if !inRange {
		return nil, false, false
	}
	return kmsg.RequestForKey(key), true, true
}

// NewRequestInto implements wire.RequestRecycler.
func (t *Table) NewRequestInto(spare kmsg.Request, key, version int16) (kmsg.Request, bool, bool) {
	if spare != nil && spare.Key() == key {
		if a, ok := t.lookup(key); ok && version >= a.min && version <= a.max {
			return spare, true, true
		}
	}
	return t.NewRequest(key, version)
}

// Recycle implements wire.RequestRecycler for OffsetCommit, the one request a client sends at a
// rate where its allocations show (issue 12): its handler copies every field it passes on
// (strings and the nullable ones' pointers are allocated afresh by each decode) and answers
// with memory of its own, so nothing refers to the request once Handle has returned, even a
// shard op still queued after its caller gave up. The reset keeps the topics' array and
// nothing else: kmsg zeroes the elements it decodes into, and a field an older version lacks
// must read as its default, not as the previous request's.
func (t *Table) Recycle(req kmsg.Request) kmsg.Request {
	r, ok := req.(*kmsg.OffsetCommitRequest)
	if !ok || cap(r.Topics) > maxRecycledTopics {
		return nil
	}
	topics := r.Topics[:0]
	clear(topics[:cap(topics)]) // nor the partitions' arrays and names its topics held
	*r = kmsg.OffsetCommitRequest{}
	r.Default()
	r.Topics = topics
	return r
}

// maxRecycledTopics bounds the topics' array a connection keeps between requests: one large
// commit must not pin its array (64 B a topic) for the connection's lifetime.
const maxRecycledTopics = 8

// Handle implements wire.Handler.
func (t *Table) Handle(ctx context.Context, r *wire.Request) kmsg.Response {
	a, _ := t.lookup(r.Key)
	return a.handle(ctx, r)
}
