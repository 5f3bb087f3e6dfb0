package handlers

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/coordinatord/coordinatord/pkg/kerrclass"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var updateDocs = flag.Bool("update", false, "rewrite docs/errors.md from the errorDocs table")

// knownFrom is the first version of each API whose clients know a code (the version that
// introduced the code on that API, per the Kafka protocol and spec coordinator-apis §4.5);
// codes not listed are known at every version of the API.
var knownFrom = map[kmsg.Key]map[int16]int16{
	kmsg.TxnOffsetCommit: {
		kerr.CoordinatorLoadInProgress.Code: 2, // pre-2.0 producers crash on it
		kerr.FencedInstanceID.Code:          3,
		kerr.TransactionAbortable.Code:      4,
		kerr.GroupIDNotFound.Code:           6,
		kerr.StaleMemberEpoch.Code:          6,
		kerr.UnknownTopicID.Code:            6,
	},
	kmsg.OffsetCommit: {
		kerr.FencedInstanceID.Code: 7,
		kerr.GroupIDNotFound.Code:  9,
		kerr.StaleMemberEpoch.Code: 9,
		kerr.UnknownTopicID.Code:   10,
	},
	kmsg.OffsetFetch: {
		kerr.UnstableOffsetCommit.Code: 7,
		kerr.StaleMemberEpoch.Code:     9,
		kerr.UnknownTopicID.Code:       10,
	},
	kmsg.JoinGroup:      {kerr.MemberIDRequired.Code: 4, kerr.FencedInstanceID.Code: 5},
	kmsg.SyncGroup:      {kerr.FencedInstanceID.Code: 3},
	kmsg.Heartbeat:      {kerr.FencedInstanceID.Code: 3},
	kmsg.LeaveGroup:     {kerr.FencedInstanceID.Code: 3},
	kmsg.DescribeGroups: {kerr.GroupIDNotFound.Code: 6},
	kmsg.DeleteGroups:   {kerr.GroupDeletionFailed.Code: 3},
}

// docSources are the files whose codes errorDocs must cover: the handlers of the documented
// APIs and the group logic behind them.
var docSources = []string{
	"008_offset_commit.go", "009_offset_fetch.go", "028_txn_offset_commit.go", "commit_partitions.go", "errors.go",
	"011_join_group.go", "012_heartbeat.go", "013_leave_group.go", "014_sync_group.go",
	"015_describe_groups.go", "016_list_groups.go", "042_delete_groups.go",
	"../state/shard/offsets_ops.go", "../state/shard/offsets_txn.go", "../offsets/txn.go",
	"../state/classic/logic.go",
	"017_sasl_handshake.go", "036_sasl_authenticate.go", "048_describe_client_quotas.go",
	"050_describe_user_scram_credentials.go", "051_alter_user_scram_credentials.go",
	"068_consumer_group_heartbeat.go", "069_consumer_group_describe.go",
	"../state/consumer/heartbeat.go", "../state/consumer/ops.go", "../state/meta/scram.go",
	"../upstream/txn.go",
}

// docAPIs are the documented APIs, in the order of docs/errors.md.
var docAPIs = []kmsg.Key{
	kmsg.TxnOffsetCommit, kmsg.OffsetFetch, kmsg.OffsetCommit, kmsg.JoinGroup, kmsg.SyncGroup,
	kmsg.Heartbeat, kmsg.LeaveGroup, kmsg.DescribeGroups, kmsg.ListGroups, kmsg.DeleteGroups,
	kmsg.SASLHandshake, kmsg.SASLAuthenticate, kmsg.DescribeClientQuotas, kmsg.DescribeUserSCRAMCredentials,
	kmsg.AlterUserSCRAMCredentials, kmsg.ConsumerGroupHeartbeat, kmsg.ConsumerGroupDescribe,
}

func versionRange(t *testing.T) map[kmsg.Key][2]int16 {
	out := map[kmsg.Key][2]int16{}
	for _, v := range New(Deps{}).Versions() {
		out[kmsg.Key(v.ApiKey)] = [2]int16{v.MinVersion, v.MaxVersion}
	}
	return out
}

func codeName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	return fmt.Sprintf("`%s` (%d)", kerr.ErrorForCode(code).(*kerr.Error).Message, code)
}

func versionsText(lo, hi int16) string {
	if lo == hi {
		return fmt.Sprintf("v%d", lo)
	}
	return fmt.Sprintf("v%d–%d", lo, hi)
}

// renderErrorsDoc builds docs/errors.md, failing t for any row that would put a code on the
// wire a version does not know.
func renderErrorsDoc(t *testing.T) string {
	ranges := versionRange(t)
	var b strings.Builder
	b.WriteString(`# Error codes coordinatord answers

Generated from the ` + "`errorDocs`" + ` table in internal/handlers/errcodes.go by
` + "`go test ./internal/handlers -run TestErrorsDoc -update`" + `; the test fails when this file, the table,
the handlers' per-version translation or the codes a version knows disagree. One line per
(API, code, condition) and range of request versions that get the same code: an old version gets
the code its clients know, as Kafka's handlers answer (spec coordinator-apis §4.5).

The category is what a Kafka 4.4 client makes of the code on that API, by KIP-1050
(` + "`pkg/kerrclass`" + `): retriable (retried as is), refresh-retriable (coordinator or metadata looked up
again, then retried), abortable (the transaction is aborted, the producer lives), application-recoverable
(the producer or the consumer's membership is finished: recreate and restart), invalid-configuration
(an operator must act), unclassified (no category: the Java transactional producer treats it as
fatal; consumers handle the group codes by rejoining). The KIP covers the transactional path; for
the group APIs the column gives the code's exception class in kafka-clients 4.4 for reference.

The transaction coordinator's APIs (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
FindCoordinator for a transaction, DescribeTransactions, ListTransactions) are not served
standalone: ApiVersions does not list them, and a request for one closes the connection, as Kafka
does for an API it does not serve. In gateway mode they are forwarded and their codes are the
upstream's, untouched, so a client puts each in the category it would against the cluster. The
gateway adds no code of its own there; where it cannot hand an answer on it closes the client's
connection instead, which a Kafka 4.4 client treats as a network error (retriable): when the
upstream connection fails; when an EndTxn answer comes back but its outcome could not yet be
written to the staged offsets (the retried EndTxn finds it applied or applies it first;
docs/transactions.md, the marker relay); and, until it is resolved, for a request carrying the
producer id of a transaction recovery had to set aside because the upstream refused to describe it.

## What real clients do with them (tested end to end)

Each row is a condition provoked for real through the gateway in front of Kafka 4.4, and what the
client did, as ` + "`test/e2e/txn_categories_test.go`" + ` asserts it (the exception, the offsets read back
with RequireStable, the output read with read_committed). The Java client is kafka-clients 4.4's
` + "`KafkaProducer`" + ` (` + "`test/e2e/streamsapp/src/TxnProducer.java`" + `); franz-go is ` + "`kgo.GroupTransactSession`" + `.
Note the Java producer's own handling on TxnOffsetCommit: the membership codes (ILLEGAL_GENERATION,
UNKNOWN_MEMBER_ID, GROUP_ID_NOT_FOUND, STALE_MEMBER_EPOCH) raise CommitFailedException and
GROUP_AUTHORIZATION_FAILED raises GroupAuthorizationException, both as *abortable* errors: the
KIP-1050 category says what the application must fix (rejoin the group, grant the ACL), but the
producer itself survives an abort.

| category | condition | Java 4.4 producer | franz-go | test |
| --- | --- | --- | --- | --- |
| retriable | coordinatord killed (-9) and restarted while a transaction is open: once after its offsets were staged (commit called while down), once before (sendOffsetsToTransaction called while down) | both calls block, retry and succeed; offsets and records of both transactions committed | killed as End starts committing offsets: End returns committed, no error; each input record once in the output, offsets to match | ` + "`TestGateway_KIP1050RetriableJavaProducerRidesOutARestart`" + `, ` + "`TestGateway_KIP1050RetriableTransactSessionRidesOutARestart`" + ` |
| refresh-retriable | offsets for a partition the topic does not have yet (UNKNOWN_TOPIC_OR_PARTITION), then the partition is created | sendOffsetsToTransaction keeps retrying the TxnOffsetCommit and returns once coordinatord's catalog has the partition; the commit carries that offset | | ` + "`TestGateway_KIP1050RefreshRetriableUnknownPartitionRetriedUntilItExists`" + ` |
| application-recoverable (membership) | TxnOffsetCommit with a membership the group does not have (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID) | CommitFailedException; commitTransaction refused; abortTransaction works and the next transaction commits; the first one's record never visible | End aborts (committed=false, no error), the same records commit in the next transaction, each output record once | ` + "`TestGateway_KIP1050StaleMembershipAbortsAndTheNextTransactionCommits`" + ` |
| application-recoverable (fenced) | a second producer with the same transactional id initializes while the first has staged offsets | the first's commit throws ProducerFencedException and it cannot begin again; its staged offsets are dropped before the second's initTransactions returns; the second commits alone | End returns PRODUCER_FENCED (from the forwarded EndTxn; ` + "`kerrclass`" + `: application-recoverable); nothing committed or staged; a new session with the id commits each record once | ` + "`TestGateway_KIP1050FencedJavaProducerSurfacesAndANewOneCommits`" + `, ` + "`TestGateway_KIP1050FencedTransactSessionSurfacesAndANewOneCommits`" + ` |
| invalid-configuration | upstream ACLs: no TRANSACTIONAL_ID WRITE (forwarded FindCoordinator / InitProducerId), no GROUP READ (forwarded AddOffsetsToTxn) | initTransactions throws TransactionalIdAuthorizationException and the producer is finished; sendOffsetsToTransaction throws GroupAuthorizationException, abort works, a transaction on a permitted group commits | | ` + "`TestGateway_KIP1050InvalidConfigurationAuthorizationDenied`" + ` |
| abortable | TRANSACTION_ABORTABLE (KIP-890 verification) | not reachable with an unmodified client (the producer always adds the offsets partition first); wire level only: ` + "`test/e2e/txn_verify_test.go`" + ` | | |

`)
	for _, api := range docAPIs {
		r, ok := ranges[api]
		if !ok {
			t.Fatalf("%s is documented but not served", api.Name())
		}
		fmt.Fprintf(&b, "## %s (key %d, v%d–%d)\n\n", api.Name(), api, r[0], r[1])
		b.WriteString("| versions | code | condition | category |\n| --- | --- | --- | --- |\n")
		for _, d := range errorDocs {
			if d.api != api {
				continue
			}
			lo, hi := max(d.from, r[0]), r[1]
			if d.until > 0 {
				hi = min(d.until, hi)
			}
			for v := lo; v <= hi; v++ {
				w := wireCode(api, v, d.code)
				if from, ok := knownFrom[api][w]; ok && v < from {
					t.Errorf("%s v%d: %q answers %s, which clients know from v%d", api.Name(), v, d.condition, codeName(w), from)
				}
				if v < hi && wireCode(api, v+1, d.code) == w {
					continue
				}
				fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", versionsText(lo, v), codeName(w), d.condition, kerrclass.Of(api.Int16(), w))
				lo = v + 1
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

func TestErrorsDoc(t *testing.T) {
	got := renderErrorsDoc(t)
	const path = "../../docs/errors.md"
	if *updateDocs {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != got {
		t.Errorf("docs/errors.md is not what errorDocs generates; run go test ./internal/handlers -run TestErrorsDoc -update")
	}
}

// TestErrorsDocCoversHandlers: a code a documented handler (or the group logic behind it) can
// answer has a row, so the table cannot silently fall behind the code.
func TestErrorsDocCoversHandlers(t *testing.T) {
	documented := map[string]bool{}
	for _, d := range errorDocs {
		documented[kerr.ErrorForCode(d.code).(*kerr.Error).Message] = true
	}
	byName := map[string]string{}
	for c := int16(-1); c < 200; c++ {
		if e, ok := kerr.ErrorForCode(c).(*kerr.Error); ok && c != 0 {
			byName[goName(e)] = e.Message
		}
	}
	ref := regexp.MustCompile(`kerr\.([A-Za-z]+)\.Code`)
	for _, f := range docSources {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ref.FindAllStringSubmatch(string(src), -1) {
			name, ok := byName[m[1]]
			if !ok {
				t.Fatalf("%s: kerr.%s is not a known code", f, m[1])
			}
			// Codes those files use only for an API outside docs/errors.md (the marker's
			// coordinator epoch), or read from the upstream's DescribeTransactions answer and
			// translated before a client sees them (the verification in ../upstream/txn.go).
			if slices.Contains([]string{"TRANSACTION_COORDINATOR_FENCED", "NETWORK_EXCEPTION", "TRANSACTIONAL_ID_NOT_FOUND"}, name) {
				continue
			}
			if !documented[name] {
				t.Errorf("%s answers %s, which errorDocs does not list", f, name)
			}
		}
	}
}

// goName is the kerr variable name of a code: its Kafka name in camel case, with franz-go's
// spellings of ID and the renamed NOT_LEADER_OR_FOLLOWER.
func goName(e *kerr.Error) string {
	var b strings.Builder
	for _, w := range strings.Split(strings.ToLower(e.Message), "_") {
		switch w {
		case "id":
			b.WriteString("ID")
		default:
			b.WriteString(strings.ToUpper(w[:1]) + w[1:])
		}
	}
	return b.String()
}

// TestTransactionalCategories pins what KIP-1050 asks of the transactional path: a loading
// shard is retriable wherever the client knows the code, a fenced producer is never
// retriable, and nothing sends a Kafka 4.4 producer into an abort loop with
// REBALANCE_IN_PROGRESS.
func TestTransactionalCategories(t *testing.T) {
	ranges := versionRange(t)
	r := ranges[kmsg.TxnOffsetCommit]
	for v := r[0]; v <= r[1]; v++ {
		load := wireCode(kmsg.TxnOffsetCommit, v, kerr.CoordinatorLoadInProgress.Code)
		want := kerrclass.Retriable
		if v < 2 {
			want = kerrclass.RefreshRetriable // COORDINATOR_NOT_AVAILABLE
		}
		if c := kerrclass.Of(kmsg.TxnOffsetCommit.Int16(), load); c != want {
			t.Errorf("TxnOffsetCommit v%d loading: %s is %s, want %s", v, codeName(load), c, want)
		}
		for _, d := range errorDocs {
			if d.api != kmsg.TxnOffsetCommit {
				continue
			}
			w := wireCode(kmsg.TxnOffsetCommit, v, d.code)
			if w == kerr.RebalanceInProgress.Code {
				t.Errorf("TxnOffsetCommit v%d answers REBALANCE_IN_PROGRESS (%s)", v, d.condition)
			}
			if (w == kerr.InvalidProducerEpoch.Code || w == kerr.ProducerFenced.Code) && kerrclass.IsRetriable(kmsg.TxnOffsetCommit.Int16(), w) {
				t.Errorf("TxnOffsetCommit v%d: a fenced producer is retriable", v)
			}
		}
	}
}

// The OffsetCommit handler answers through offsetCommitCode: before v9 a missing group with a
// generation is ILLEGAL_GENERATION, as Kafka's OffsetMetadataManager answers.
func TestOffsetCommitCodeTranslation(t *testing.T) {
	for v := int16(2); v <= 10; v++ {
		want := kerr.GroupIDNotFound.Code
		if v < 9 {
			want = kerr.IllegalGeneration.Code
		}
		if got := offsetCommitCode(v, kerr.GroupIDNotFound.Code); got != want {
			t.Errorf("v%d: %d, want %d", v, got, want)
		}
	}
}
