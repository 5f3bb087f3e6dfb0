package gateway

// The values of the closed labels of the relay's series, each set a type of its own: the
// metrics table of docs/operations.md lists them, and a test holds the two equal.

// txnOutcome is the outcome label of coordinatord_gateway_txn_outcomes_total.
type txnOutcome string

const (
	txnCommitted txnOutcome = "commit"
	txnAborted   txnOutcome = "abort"
	// txnAmbiguous: the upstream could not tell; the offsets stay staged.
	txnAmbiguous txnOutcome = "ambiguous"
)

// txnSource is where the relay learned an outcome, the source label of
// coordinatord_gateway_txn_outcomes_total.
type txnSource string

const (
	fromEndTxn         txnSource = "end_txn"
	fromInitProducerID txnSource = "init_producer_id"
	fromUpstreamState  txnSource = "upstream_state"
	fromRecovery       txnSource = "recovery"
	fromShardLoad      txnSource = "shard_load"
	fromPeer           txnSource = "peer"
)

// peerMarkerResult is the result label of coordinatord_gateway_txn_peer_markers_total.
type peerMarkerResult string

const (
	peerMarkerApplied   peerMarkerResult = "applied"
	peerMarkerRefused   peerMarkerResult = "refused"
	peerMarkerRetry     peerMarkerResult = "retry"
	peerMarkerSettled   peerMarkerResult = "settled"
	peerMarkerUnsettled peerMarkerResult = "unsettled"
)
