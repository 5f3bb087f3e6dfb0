package gateway

import (
	"path/filepath"

	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ownNodeKeys are broker-scoped admin APIs that Kafka's admin tools send to every broker the
// cluster lists, coordinatord's own node included: kafka-transactions.sh list (ListTransactions)
// and kafka-log-dirs.sh --describe (DescribeLogDirs). On coordinatord's own port they are
// answered for coordinatord itself. Forwarded, they would report the pinned upstream broker's
// transactions a second time, and its log directories as node coordinatord's.
var ownNodeKeys = map[int16]bool{35: true, 66: true}

// transactionStates are the state names Kafka's ListTransactions knows; any other state filter
// is reported back in UnknownStateFilters, as Kafka does.
var transactionStates = map[string]bool{
	"Empty": true, "Ongoing": true, "PrepareCommit": true, "PrepareAbort": true, "CompleteCommit": true,
	"CompleteAbort": true, "Dead": true, "PrepareEpochFence": true,
}

// ownNodeRequest is the request to decode for an own-node key at a version the codec knows.
func ownNodeRequest(key, version int16) (kmsg.Request, bool) {
	req := kmsg.RequestForKey(key)
	if req == nil || version < 0 || version > req.MaxVersion() {
		return nil, false
	}
	return req, true
}

// ownNode answers an own-node key for coordinatord. It is no transaction coordinator (FindCoordinator
// TRANSACTION leads to upstream brokers), so it lists no transactions; it holds no partition of
// the upstream's topics, so its one log directory, log.dirs, lists no topic. One directory and
// not none: Kafka's admin client takes an answer with no directory as CLUSTER_AUTHORIZATION_FAILED.
func (p *portHandler) ownNode(r *wire.Request) kmsg.Response {
	switch req := r.Body.(type) {
	case *kmsg.ListTransactionsRequest:
		resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
		resp.SetVersion(r.Version)
		resp.UnknownStateFilters = []string{}
		for _, s := range req.StateFilters {
			if !transactionStates[s] {
				resp.UnknownStateFilters = append(resp.UnknownStateFilters, s)
			}
		}
		resp.TransactionStates = []kmsg.ListTransactionsResponseTransactionState{}
		return resp
	case *kmsg.DescribeLogDirsRequest:
		resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
		resp.SetVersion(r.Version)
		dir := kmsg.NewDescribeLogDirsResponseDir()
		dir.Dir, dir.TotalBytes, dir.UsableBytes = p.g.opts.DataDir, -1, -1
		if abs, err := filepath.Abs(dir.Dir); err == nil {
			dir.Dir = abs
		}
		dir.TotalBytes, dir.UsableBytes = diskSpace(dir.Dir)
		dir.Topics = []kmsg.DescribeLogDirsResponseDirTopic{}
		resp.Dirs = []kmsg.DescribeLogDirsResponseDir{dir}
		return resp
	}
	return nil
}
