package e2e

// KIP-1050 categories on the transactional path, seen from real clients through the gateway: for
// each category a condition coordinatord (or the upstream behind it) really produces, and what a
// Java 4.4 KafkaProducer (streamsapp/src/TxnProducer.java) and franz-go's GroupTransactSession
// then do, judged by what a user sees: the exception, the offsets read back with RequireStable,
// and the output records a read_committed consumer gets. docs/errors.md lists the codes.

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/pkg/kerrclass"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// javaTxn is one Java transactional producer, driven a command at a time.
type javaTxn struct {
	t       *testing.T
	name    string
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	answers chan string
	log     *os.File
}

func startJavaTxn(t *testing.T, name, addr, txnID string, configs ...string) *javaTxn {
	t.Helper()
	logf, err := os.CreateTemp(t.TempDir(), name+"-*.log")
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"-Xmx256m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", wordCountClasspath(t), "TxnProducer", addr, txnID}, configs...)
	p := &javaTxn{t: t, name: name, cmd: exec.Command("java", args...), answers: make(chan string, 16), log: logf}
	p.cmd.Stderr = logf
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.answers <- sc.Text()
		}
		close(p.answers)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Signal(syscall.SIGKILL)
		p.cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("%s stderr (last 3000 bytes):\n%s", name, tail(b, 3000))
		}
	})
	return p
}

// send hands the producer a command without waiting for its answer (a call that blocks while
// the test changes the world under it).
func (p *javaTxn) send(command string) {
	p.t.Helper()
	if _, err := io.WriteString(p.stdin, command+"\n"); err != nil {
		p.t.Fatalf("%s: %v", p.name, err)
	}
}

// answer is the producer's answer to the oldest command not yet answered.
func (p *javaTxn) answer(within time.Duration) string {
	p.t.Helper()
	select {
	case a, ok := <-p.answers:
		if !ok {
			p.t.Fatalf("%s exited", p.name)
		}
		return a
	case <-time.After(within):
		p.t.Fatalf("%s did not answer within %s", p.name, within)
		return ""
	}
}

func (p *javaTxn) do(command string) string {
	p.t.Helper()
	p.send(command)
	return p.answer(3 * time.Minute)
}

func (p *javaTxn) ok(command string) {
	p.t.Helper()
	if a := p.do(command); !strings.HasPrefix(a, "OK ") {
		p.t.Fatalf("%s %q: %s", p.name, command, a)
	}
}

// commitThenEnd runs one transaction that must commit: value and then "end" to partition 0 of
// out, and offset for partition of in in group.
func (p *javaTxn) commitThenEnd(out, value, group, in string, partition int, offset int64) {
	p.t.Helper()
	p.ok("begin")
	p.ok("send " + out + " 0 " + value)
	p.ok("offsets " + group + " " + in + " " + strconv.Itoa(partition) + " " + strconv.FormatInt(offset, 10))
	p.ok("send " + out + " 0 end")
	p.ok("commit")
}

// committedValues reads topic (one partition) with read_committed up to the first record whose
// value is last, and returns the values before it, in order.
func committedValues(t *testing.T, ctx context.Context, addr, topic, last string, opts ...kgo.Opt) []string {
	t.Helper()
	rc := newClient(t, addr, append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	var got []string
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fs := rc.PollFetches(pctx)
		cancel()
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			if done {
				return
			}
			if string(r.Value) == last {
				done = true
				return
			}
			got = append(got, string(r.Value))
		})
		if done {
			return got
		}
	}
	t.Fatalf("read_committed never showed %q in %s; saw %v", last, topic, got)
	return nil
}

func txnTopics(t *testing.T, ctx context.Context, cl *kgo.Client, inParts int32, topics ...string) {
	t.Helper()
	adm := kadm.NewClient(cl)
	for i, topic := range topics {
		parts := int32(1)
		if i == 0 {
			parts = inParts
		}
		if _, err := adm.CreateTopic(ctx, parts, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
}

func wantOffsets(t *testing.T, ctx context.Context, cl *kgo.Client, group, topic string, parts int32, want map[int32]int64, what string) {
	t.Helper()
	got, stable := stableOffsets(t, ctx, cl, group, topic, parts)
	if !stable {
		t.Fatalf("%s: offsets of %s still staged (UNSTABLE_OFFSET_COMMIT)", what, group)
	}
	if len(got) != len(want) {
		t.Fatalf("%s: committed offsets %v, want %v", what, got, want)
	}
	for p, o := range want {
		if got[p] != o {
			t.Fatalf("%s: committed offsets %v, want %v", what, got, want)
		}
	}
}

// Retriable: coordinatord is killed (-9) and restarted while a Java producer's transaction is in
// flight, once after its offsets were staged (the commit is called while coordinatord is down)
// and once before (sendOffsetsToTransaction is called while it is down). The producer retries
// without the application seeing anything, both calls succeed once coordinatord is back, and
// the offsets and output of both transactions are committed.
func TestGateway_KIP1050RetriableJavaProducerRidesOutARestart(t *testing.T) {
	t.Parallel()
	c := startTxnCase(t, "kr", 5*time.Minute, 1)
	g, ctx, cl, run, in, out, group := c.g, c.ctx, c.cl, c.run, c.in, c.out, c.group

	p := startJavaTxn(t, "producer", g.Addr, "kr-"+run, "max.block.ms=180000", "transaction.timeout.ms=180000", "delivery.timeout.ms=180000")
	p.ok("init")
	p.ok("begin")
	p.ok("send " + out + " 0 one")
	p.ok("offsets " + group + " " + in + " 0 7")
	g.kill()
	p.send("commit")
	g.start()
	if a := p.answer(3 * time.Minute); a != "OK commit" {
		t.Fatalf("commit across the restart: %s", a)
	}
	cl = newClient(t, g.Addr)
	wantOffsets(t, ctx, cl, group, in, 1, map[int32]int64{0: 7}, "after a commit called while coordinatord was down")

	p.ok("begin")
	p.ok("send " + out + " 0 two")
	g.kill()
	p.send("offsets " + group + " " + in + " 0 9")
	g.start()
	if a := p.answer(3 * time.Minute); a != "OK offsets" {
		t.Fatalf("sendOffsetsToTransaction across the restart: %s", a)
	}
	p.ok("send " + out + " 0 end")
	p.ok("commit")
	cl = newClient(t, g.Addr)
	wantOffsets(t, ctx, cl, group, in, 1, map[int32]int64{0: 9}, "after offsets sent while coordinatord was down")
	wantCommittedOutput(t, ctx, g.Addr, out, []string{"one", "two"})
}

// Refresh-retriable: offsets for a partition the topic does not have yet answer
// UNKNOWN_TOPIC_OR_PARTITION. The Java producer keeps retrying the TxnOffsetCommit; once the
// partition is created (through the gateway) and coordinatord's catalog has it, the same
// sendOffsetsToTransaction call returns and the transaction commits with that offset.
func TestGateway_KIP1050RefreshRetriableUnknownPartitionRetriedUntilItExists(t *testing.T) {
	t.Parallel()
	c := startTxnCase(t, "ku", 3*time.Minute, 1, "upstream.metadata.max.age.ms=1000")
	g, ctx, cl, run, in, out, group := c.g, c.ctx, c.cl, c.run, c.in, c.out, c.group

	p := startJavaTxn(t, "producer", g.Addr, "ku-"+run, "max.block.ms=120000")
	p.ok("init")
	p.ok("begin")
	p.ok("send " + out + " 0 first")
	const unknown = `coordinatord_request_errors_total{api="TxnOffsetCommit",error="UNKNOWN_TOPIC_OR_PARTITION"}`
	before := metricSum(t, g, unknown)
	p.send("offsets " + group + " " + in + " 1 4")
	for deadline := time.Now().Add(60 * time.Second); metricSum(t, g, unknown) < before+2; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the producer did not retry a TxnOffsetCommit answered UNKNOWN_TOPIC_OR_PARTITION")
		}
		select {
		case a := <-p.answers:
			t.Fatalf("sendOffsetsToTransaction for a partition that does not exist returned: %s", a)
		default:
		}
	}
	if _, err := kadm.NewClient(cl).CreatePartitions(ctx, 1, in); err != nil {
		t.Fatal(err)
	}
	if a := p.answer(90 * time.Second); a != "OK offsets" {
		t.Fatalf("sendOffsetsToTransaction once the partition exists: %s", a)
	}
	p.ok("send " + out + " 0 end")
	p.ok("commit")
	wantOffsets(t, ctx, cl, group, in, 2, map[int32]int64{1: 4}, "after the commit")
	wantCommittedOutput(t, ctx, g.Addr, out, []string{"first"})
}

// Stale group membership (ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID on TxnOffsetCommit,
// application-recoverable in KIP-1050's table: the consumer must rejoin): the Java producer
// throws CommitFailedException from sendOffsetsToTransaction and refuses to commit, but stays
// usable: it aborts, and its next transaction with current group metadata commits. franz-go's
// GroupTransactSession aborts the transaction in End (committed=false, no error) and commits
// the same records in the next one. Nothing of the aborted transactions is visible.
func TestGateway_KIP1050StaleMembershipAbortsAndTheNextTransactionCommits(t *testing.T) {
	t.Parallel()
	c := startTxnCase(t, "ks", 4*time.Minute, 1)
	g, ctx, cl, run, in, out, group := c.g, c.ctx, c.cl, c.run, c.in, c.out, c.group

	p := startJavaTxn(t, "producer", g.Addr, "ks-"+run)
	p.ok("init")
	p.ok("begin")
	p.ok("send " + out + " 0 stale")
	if a := p.do("offsets " + group + " " + in + " 0 5 ghost-member 3"); !strings.HasPrefix(a, "ERR offsets CommitFailedException ") {
		t.Fatalf("sendOffsetsToTransaction with a stale membership: %s, want CommitFailedException", a)
	}
	if a := p.do("commit"); !strings.HasPrefix(a, "ERR commit ") {
		t.Fatalf("commit after a failed offset commit: %s, want it refused", a)
	}
	p.ok("abort")
	p.commitThenEnd(out, "fresh", group, in, 0, 6)
	wantOffsets(t, ctx, cl, group, in, 1, map[int32]int64{0: 6}, "Java producer")
	wantCommittedOutput(t, ctx, g.Addr, out, []string{"fresh"})

	// franz-go: the first End sends its TxnOffsetCommit for a member the group does not have.
	in2, out2, group2 := "ks2-in-"+run, "ks2-out-"+run, "ks2-g-"+run
	txnTopics(t, ctx, cl, 1, in2, out2)
	const n = 10
	produceN(t, ctx, cl, in2, n)
	sess := newTransactSession(t, g.Addr, "ks2-"+run, group2, in2, out2, 60*time.Second)
	defer sess.Close()
	stale, staleAborted := false, false
	copyUntilCommitted(t, ctx, sess, n, func(newRecords bool) context.Context {
		if stale = !staleAborted && newRecords; !stale {
			return ctx
		}
		return kgo.PreTxnCommitFnContext(ctx, func(req *kmsg.TxnOffsetCommitRequest) error {
			req.MemberID = "ghost-member"
			return nil
		})
	}, func(committed bool, err error) {
		if err != nil {
			t.Fatalf("End (stale membership %v): %v", stale, err)
		}
		if stale {
			if committed {
				t.Fatal("End committed a transaction whose offsets were refused for a stale membership")
			}
			staleAborted = true
			wantOffsets(t, ctx, cl, group2, in2, 1, map[int32]int64{}, "franz-go, after the aborted transaction")
		}
	})
	if !staleAborted {
		t.Fatal("the stale commit never ran")
	}
	wantOffsets(t, ctx, cl, group2, in2, 1, map[int32]int64{0: n}, "franz-go")
	wantEachInputOnce(t, ctx, g.Addr, out2, "ks2-seal-"+run, n)
}

// Application-recoverable, fenced producer: a second Java producer with the same
// transactional id initializes while the first has staged offsets. The first's offsets are
// dropped before the second's initTransactions returns, the first's commit throws
// ProducerFencedException and it can do nothing more, and the new producer's transaction
// commits alone: its offsets only, its records only.
func TestGateway_KIP1050FencedJavaProducerSurfacesAndANewOneCommits(t *testing.T) {
	t.Parallel()
	c := startTxnCase(t, "kf", 3*time.Minute, 2)
	g, ctx, cl, run, in, out, group := c.g, c.ctx, c.cl, c.run, c.in, c.out, c.group
	txnID := "kf-" + run

	zombie := startJavaTxn(t, "zombie", g.Addr, txnID)
	zombie.ok("init")
	zombie.ok("begin")
	zombie.ok("send " + out + " 0 zombie")
	zombie.ok("offsets " + group + " " + in + " 1 50")
	if _, stable := stableOffsets(t, ctx, cl, group, in, 2); stable {
		t.Fatal("the first producer's offsets are not staged")
	}

	fresh := startJavaTxn(t, "fresh", g.Addr, txnID)
	fresh.ok("init")
	wantOffsets(t, ctx, cl, group, in, 2, map[int32]int64{}, "after the new producer's initTransactions")

	a := zombie.do("commit")
	if !strings.HasPrefix(a, "ERR commit ProducerFencedException ") && !strings.HasPrefix(a, "ERR commit InvalidProducerEpochException ") {
		t.Fatalf("the fenced producer's commit: %s, want ProducerFencedException", a)
	}
	if a := zombie.do("begin"); !strings.HasPrefix(a, "ERR begin ") {
		t.Fatalf("the fenced producer begins a new transaction: %s, want it refused", a)
	}

	fresh.commitThenEnd(out, "fresh", group, in, 0, 20)
	wantOffsets(t, ctx, cl, group, in, 2, map[int32]int64{0: 20}, "after the new producer's commit")
	wantCommittedOutput(t, ctx, g.Addr, out, []string{"fresh"})
}

// Invalid configuration (KIP-1050's fatal category), with the upstream's ACLs behind the
// gateway: a Java producer whose transactional id its principal may not write fails
// initTransactions with TransactionalIdAuthorizationException and can do nothing else; one
// whose principal may not read the group gets GroupAuthorizationException from
// sendOffsetsToTransaction, which the Java producer makes abortable: it aborts, and a
// transaction on a group it may read commits, offsets and records.
func TestGateway_KIP1050InvalidConfigurationAuthorizationDenied(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	adminAddr, saslAddr, caFile := startSASLKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	adm := kadm.NewClient(newClient(t, adminAddr))
	const in, out = "kc-in", "kc-out"
	lit, pre := kadm.ACLPatternLiteral, kadm.ACLPatternPrefixed
	prepareSASLUpstream(t, ctx, adm, []string{"gw", "alice"}, in,
		// The gateway verifies and recovers transactions: it describes them.
		kadm.NewACLs().Allow("User:gw").AllowHosts().Topics("*").Clusters().TransactionalIDs("*").Operations(kadm.OpDescribe).ResourcePatternType(lit),
		kadm.NewACLs().Allow("User:alice").AllowHosts().Topics(in, out).Operations(kadm.OpAll).ResourcePatternType(lit),
		kadm.NewACLs().Allow("User:alice").AllowHosts().TransactionalIDs("alice-").Operations(kadm.OpWrite, kadm.OpDescribe).ResourcePatternType(pre),
		kadm.NewACLs().Allow("User:alice").AllowHosts().Groups("app-").Operations(kadm.OpRead).ResourcePatternType(pre),
	)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, out); err != nil {
		t.Fatal(err)
	}

	g := startSASLGateway(t, saslAddr, caFile, "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer")
	sasl := []string{"security.protocol=SASL_PLAINTEXT", "sasl.mechanism=SCRAM-SHA-256",
		`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="alice-secret";`}

	denied := startJavaTxn(t, "denied", g.Addr, "bob-1", append(sasl, "max.block.ms=30000")...)
	if a := denied.do("init"); !strings.HasPrefix(a, "ERR init TransactionalIdAuthorizationException ") {
		t.Fatalf("initTransactions on a transactional id alice may not write: %s", a)
	}
	if a := denied.do("begin"); !strings.HasPrefix(a, "ERR begin ") {
		t.Fatalf("a producer whose initTransactions was refused begins a transaction: %s", a)
	}

	p := startJavaTxn(t, "alice", g.Addr, "alice-1", append(sasl, "max.block.ms=60000")...)
	p.ok("init")
	p.ok("begin")
	p.ok("send " + out + " 0 denied")
	if a := p.do("offsets reports " + in + " 0 3"); !strings.HasPrefix(a, "ERR offsets GroupAuthorizationException ") {
		t.Fatalf("sendOffsetsToTransaction for a group alice may not read: %s", a)
	}
	p.ok("abort")
	p.commitThenEnd(out, "allowed", "app-kc", in, 0, 4)

	alice := newClient(t, g.Addr, scramSHA256("alice", "alice-secret"))
	wantOffsets(t, ctx, alice, "app-kc", in, 1, map[int32]int64{0: 4}, "after the allowed commit")
	wantCommittedOutput(t, ctx, g.Addr, out, []string{"allowed"}, scramSHA256("alice", "alice-secret"))
}

// Application-recoverable, fenced, with franz-go: a new instance initializes the transactional id
// while the old one's session is about to commit its offsets. The old session's End fails with
// PRODUCER_FENCED (from the forwarded AddOffsetsToTxn; franz-go adds the offsets partition after
// its pre-commit hook, so coordinatord's own INVALID_PRODUCER_EPOCH cannot be reached this way),
// which pkg/kerrclass puts in application-recoverable, and nothing of that transaction is
// committed or left staged; a new session with the same id consumes from the committed offsets
// and commits every record once.
func TestGateway_KIP1050FencedTransactSessionSurfacesAndANewOneCommits(t *testing.T) {
	t.Parallel()
	c := startTxnCase(t, "kff", 3*time.Minute, 1)
	g, ctx, cl, run, in, out, group := c.g, c.ctx, c.cl, c.run, c.in, c.out, c.group
	txnID := "kff-" + run
	const n = 10
	produceN(t, ctx, cl, in, n)

	old := newTransactSession(t, g.Addr, txnID, group, in, out, 60*time.Second)
	for fenced := false; !fenced; {
		fs := old.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatal(err)
		}
		if err := old.Begin(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) { old.Produce(ctx, &kgo.Record{Value: r.Value}, nil) })
		if fs.NumRecords() == 0 {
			if _, err := old.End(ctx, kgo.TryAbort); err != nil {
				t.Fatal(err)
			}
			continue
		}
		var initErr error
		endCtx := kgo.PreTxnCommitFnContext(ctx, func(*kmsg.TxnOffsetCommitRequest) error {
			// The new instance starts now (its own client: nothing of the old one's is entered).
			// The upstream answers CONCURRENT_TRANSACTIONS while it aborts the old transaction.
			req := kmsg.NewPtrInitProducerIDRequest()
			id := txnID
			req.TransactionalID, req.TransactionTimeoutMillis = &id, 60000
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
				resp, err := req.RequestWith(ctx, cl)
				if err == nil && resp.ErrorCode == 0 {
					initErr = nil
					return nil
				}
				if err == nil {
					err = kerr.ErrorForCode(resp.ErrorCode)
				}
				if initErr = err; time.Now().After(deadline) {
					return nil
				}
			}
		})
		committed, err := old.End(endCtx, kgo.TryCommit)
		if initErr != nil {
			t.Fatalf("the new instance's InitProducerId: %v", initErr)
		}
		if committed || err == nil {
			t.Fatalf("the fenced session's End: committed=%v err=%v, want an error", committed, err)
		}
		// What a loop classifying with pkg/kerrclass decides: this producer is finished.
		if c := kerrclass.OfError(kmsg.AddOffsetsToTxn.Int16(), err); c != kerrclass.ApplicationRecoverable {
			t.Fatalf("the fenced session's End: %v, category %v; want application-recoverable (PRODUCER_FENCED)", err, c)
		}
		fenced = true
	}
	old.Close()
	wantOffsets(t, ctx, cl, group, in, 1, map[int32]int64{}, "right after the fenced session's End")

	fresh := newTransactSession(t, g.Addr, txnID, group, in, out, 60*time.Second)
	defer fresh.Close()
	copyUntilCommitted(t, ctx, fresh, n, nil, func(_ bool, err error) {
		if err != nil {
			t.Fatalf("the new session's End: %v", err)
		}
	})
	wantOffsets(t, ctx, cl, group, in, 1, map[int32]int64{0: n}, "after the new session")
	wantEachInputOnce(t, ctx, g.Addr, out, txnID+"-seal", n)
}

// Retriable, with franz-go: coordinatord is killed (-9) the moment the session starts committing
// its offsets (before AddOffsetsToTxn and TxnOffsetCommit go out) and restarted at once. End
// rides it out: no error, the transaction commits, and at the end every input record is in the
// output once, read_committed, with the offsets committed to match.
func TestGateway_KIP1050RetriableTransactSessionRidesOutARestart(t *testing.T) {
	t.Parallel()
	c := startTxnCase(t, "krf", 4*time.Minute, 1)
	g, ctx, cl, run, in, out, group := c.g, c.ctx, c.cl, c.run, c.in, c.out, c.group
	const n = 10
	produceN(t, ctx, cl, in, n)
	sess := newTransactSession(t, g.Addr, "krf-"+run, group, in, out, 120*time.Second)
	defer sess.Close()

	restarted := make(chan string, 1) // the new admin address
	killed, kill := false, false
	copyUntilCommitted(t, ctx, sess, n, func(newRecords bool) context.Context {
		if kill = !killed && newRecords; !kill {
			return ctx
		}
		killed = true
		return kgo.PreTxnCommitFnContext(ctx, func(*kmsg.TxnOffsetCommitRequest) error {
			g.kill()
			started := g.spawn()
			go func() {
				line := <-started
				restarted <- line["admin"].(string)
			}()
			return nil
		})
	}, func(committed bool, err error) {
		if err != nil {
			t.Fatalf("End (coordinatord killed: %v): %v", kill, err)
		}
		if kill && !committed {
			t.Fatal("the transaction during which coordinatord restarted was not committed")
		}
	})
	if !killed {
		t.Fatal("coordinatord was never killed")
	}
	select {
	case g.Admin = <-restarted:
	case <-ctx.Done():
		t.Fatal("the restarted coordinatord never logged its start")
	}
	cl = newClient(t, g.Addr)
	wantOffsets(t, ctx, cl, group, in, 1, map[int32]int64{0: n}, "after the last commit")
	wantEachInputOnce(t, ctx, g.Addr, out, "krf-seal-"+run, n)
}

// txnCase is where a KIP-1050 test through the gateway starts: coordinatord in gateway mode
// (with sets), a client through it, and an input and an output topic and a group named for this
// run.
type txnCase struct {
	g                   *gateway
	ctx                 context.Context
	cl                  *kgo.Client
	run, in, out, group string
}

// startTxnCase starts a txnCase whose names begin with prefix, whose input topic has inParts
// partitions (the output topic one), and whose context ends after within.
func startTxnCase(t *testing.T, prefix string, within time.Duration, inParts int32, sets ...string) txnCase {
	t.Helper()
	requireE2E(t)
	g := startGateway(t, sets...)
	ctx, cancel := context.WithTimeout(context.Background(), within)
	t.Cleanup(cancel)
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	c := txnCase{g: g, ctx: ctx, cl: newClient(t, g.Addr), run: run,
		in: prefix + "-in-" + run, out: prefix + "-out-" + run, group: prefix + "-g-" + run}
	txnTopics(t, ctx, c.cl, inParts, c.in, c.out)
	return c
}

// wantEachInputOnce checks that topic, read with read_committed, holds the values produceN wrote
// (0..n-1), each once and in order: it commits a last record "end" in a transaction of its own
// (sealID) and reads up to it.
func wantEachInputOnce(t *testing.T, ctx context.Context, addr, topic, sealID string, n int) {
	t.Helper()
	seal := newClient(t, addr, kgo.TransactionalID(sealID))
	if err := seal.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := seal.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("end")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := seal.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	want := make([]string, n)
	for i := range want {
		want[i] = strconv.Itoa(i)
	}
	wantCommittedOutput(t, ctx, addr, topic, want)
}

// wantCommittedOutput checks the values in topic (one partition), read with read_committed up
// to a record "end", against want.
func wantCommittedOutput(t *testing.T, ctx context.Context, addr, topic string, want []string, opts ...kgo.Opt) {
	t.Helper()
	if got := committedValues(t, ctx, addr, topic, "end", opts...); !slices.Equal(got, want) {
		t.Fatalf("read_committed output %v, want %v", got, want)
	}
}

// copyUntilCommitted drives sess through transactions that copy each input record's value to
// its output, until the first n input records (one partition, from offset 0) are committed.
// endCtx (nil: ctx) chooses the context of each End, told whether the transaction holds records
// not committed yet, so that a test can change the world in End's hooks; judge checks what End
// answered.
func copyUntilCommitted(t *testing.T, ctx context.Context, sess *kgo.GroupTransactSession, n int64,
	endCtx func(newRecords bool) context.Context, judge func(committed bool, err error)) {
	t.Helper()
	if endCtx == nil {
		endCtx = func(bool) context.Context { return ctx }
	}
	for committedUpTo := int64(0); committedUpTo < n; {
		fs := sess.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("committed %d of %d: %v", committedUpTo, n, err)
		}
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		next := committedUpTo
		fs.EachRecord(func(r *kgo.Record) {
			sess.Produce(ctx, &kgo.Record{Value: r.Value}, nil)
			next = r.Offset + 1
		})
		committed, err := sess.End(endCtx(next > committedUpTo), kgo.TryCommit)
		judge(committed, err)
		if committed {
			committedUpTo = next
		}
	}
}
