package meta

import (
	"fmt"
	"sort"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/records"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/twmb/franz-go/pkg/kerr"
)

// ScramCredential is what the metadata shard keeps of a user's SCRAM password (RFC 5802):
// the salt and iteration count to give the client, StoredKey to check its proof and ServerKey
// to prove the server's knowledge. The password itself, or the salted password that would let
// anyone log in, is never stored.
type ScramCredential struct {
	Salt       []byte
	Iterations int32
	StoredKey  []byte
	ServerKey  []byte
}

// scramKey is (user, Kafka's ScramMechanism number: 1 SHA-256, 2 SHA-512).
type scramKey struct {
	user      string
	mechanism int8
}

// Kafka's limits on SCRAM iterations (ScramMechanism.minIterations and the controller's cap).
const (
	scramMinIterations = 4096
	scramMaxIterations = 16384
)

func scramRecordKey(user string, mechanism int8) []byte {
	return records.NewKey(records.KindScramCredential).String(user).Int16(int16(mechanism)).Build()
}

// ScramRecord stores a user's credential for a mechanism.
func ScramRecord(user string, mechanism int8, c ScramCredential) log.Record {
	v := records.NewValue(0).Bytes(c.Salt).Int32(c.Iterations).Bytes(c.StoredKey).Bytes(c.ServerKey).Build()
	return log.Record{Key: scramRecordKey(user, mechanism), Value: v}
}

// DeleteScramRecord is the tombstone of a user's credential for a mechanism.
func DeleteScramRecord(user string, mechanism int8) log.Record {
	return log.Record{Key: scramRecordKey(user, mechanism)}
}

func (c *Catalog) replayScram(rec log.Record) error {
	r, err := records.ReadKey(rec.Key, records.KindScramCredential)
	if err != nil {
		return err
	}
	k := scramKey{user: r.String(), mechanism: int8(r.Int16())}
	if err := r.Err(); err != nil {
		return err
	}
	if rec.Tombstone() {
		delete(c.scram, k)
		return nil
	}
	version, v, err := records.ReadValue(rec.Value)
	if err != nil {
		return err
	}
	if err := records.CheckVersion(records.KindScramCredential, version, 0); err != nil {
		return fmt.Errorf("user %s: %w", k.user, err)
	}
	cred := ScramCredential{Salt: v.Bytes(), Iterations: v.Int32(), StoredKey: v.Bytes(), ServerKey: v.Bytes()}
	if err := v.Err(); err != nil {
		return fmt.Errorf("scram credential of %s: %w", k.user, err)
	}
	c.scram[k] = cred
	return nil
}

// LookupScram reads one user's credential for a mechanism (a login); the response is
// ScramLookup.
func LookupScram(user string, mechanism int8) runtime.ReadOp[*Catalog] {
	return func(c *Catalog) (any, error) {
		cred, ok := c.scram[scramKey{user, mechanism}]
		return ScramLookup{Credential: cred, Found: ok}, nil
	}
}

// ScramLookup is LookupScram's answer.
type ScramLookup struct {
	Credential ScramCredential
	Found      bool
}

// ScramInfo is one credential as DescribeUserScramCredentials shows it.
type ScramInfo struct {
	Mechanism  int8
	Iterations int32
}

// ScramUserResult is one user's outcome in a describe or an alter.
type ScramUserResult struct {
	User    string
	Code    int16
	Message *string
	Infos   []ScramInfo // describe only
}

func scramFail(user string, err *kerr.Error, msg string) ScramUserResult {
	return ScramUserResult{User: user, Code: err.Code, Message: &msg}
}

// DescribeScram lists the credentials of users (nil: every user that has one), with Kafka's
// errors for a user asked twice or without credentials.
func DescribeScram(users []string, all bool) runtime.ReadOp[*Catalog] {
	return func(c *Catalog) (any, error) {
		byUser := map[string][]ScramInfo{}
		for k, v := range c.scram {
			byUser[k.user] = append(byUser[k.user], ScramInfo{Mechanism: k.mechanism, Iterations: v.Iterations})
		}
		for _, infos := range byUser {
			sort.Slice(infos, func(i, j int) bool { return infos[i].Mechanism < infos[j].Mechanism })
		}
		var out []ScramUserResult
		if all {
			names := make([]string, 0, len(byUser))
			for u := range byUser {
				names = append(names, u)
			}
			sort.Strings(names)
			for _, u := range names {
				out = append(out, ScramUserResult{User: u, Infos: byUser[u]})
			}
			return out, nil
		}
		count := map[string]int{}
		for _, u := range users {
			count[u]++
		}
		for _, u := range users {
			switch {
			case count[u] > 1:
				out = append(out, scramFail(u, kerr.DuplicateResource, "Cannot describe SCRAM credentials for the same user twice in a single request: "+u))
				count[u] = -1 // answered once
			case count[u] < 0:
			case len(byUser[u]) == 0:
				out = append(out, scramFail(u, kerr.ResourceNotFound, "Attempt to describe a user credential that does not exist: "+u))
			default:
				out = append(out, ScramUserResult{User: u, Infos: byUser[u]})
			}
		}
		return out, nil
	}
}

// ScramUpsertion sets a user's credential for a mechanism; Credential is already derived
// from the salted password the client sent.
type ScramUpsertion struct {
	User       string
	Mechanism  int8
	Credential ScramCredential
}

// ScramDeletion removes a user's credential for a mechanism.
type ScramDeletion struct {
	User      string
	Mechanism int8
}

func knownMechanism(m int8) bool { return m == 1 || m == 2 }

// AlterScram applies deletions and upsertions with Kafka's rules (ScramControlManager): a user
// may appear once per request; every user gets one result; what passes is written together.
func AlterScram(deletions []ScramDeletion, upsertions []ScramUpsertion) runtime.WriteOp[*Catalog] {
	return func(_ *runtime.Ctx[*Catalog], c *Catalog) runtime.Result {
		failed := map[string]ScramUserResult{}
		var failedOrder []string
		fail := func(r ScramUserResult) {
			if _, ok := failed[r.User]; !ok {
				failedOrder = append(failedOrder, r.User)
			}
			failed[r.User] = r
		}
		dels := map[string]ScramDeletion{}
		ups := map[string]ScramUpsertion{}
		validName := func(user string, m int8) *ScramUserResult {
			if user == "" {
				r := scramFail(user, kerr.UnacceptableCredential, "Username must not be empty")
				return &r
			}
			if !knownMechanism(m) {
				r := scramFail(user, kerr.UnsupportedSaslMechanism, "Unknown SCRAM mechanism")
				return &r
			}
			return nil
		}
		for _, d := range deletions {
			if _, ok := failed[d.User]; ok {
				continue
			}
			if _, dup := dels[d.User]; dup {
				delete(dels, d.User)
				fail(scramFail(d.User, kerr.DuplicateResource, "A user credential cannot be altered twice in the same request"))
				continue
			}
			if r := validName(d.User, d.Mechanism); r != nil {
				fail(*r)
				continue
			}
			if _, ok := c.scram[scramKey{d.User, d.Mechanism}]; !ok {
				fail(scramFail(d.User, kerr.ResourceNotFound, "Attempt to delete a user credential that does not exist"))
				continue
			}
			dels[d.User] = d
		}
		for _, u := range upsertions {
			if _, ok := failed[u.User]; ok {
				continue
			}
			_, dupD := dels[u.User]
			_, dupU := ups[u.User]
			if dupD || dupU {
				delete(dels, u.User)
				delete(ups, u.User)
				fail(scramFail(u.User, kerr.DuplicateResource, "A user credential cannot be altered twice in the same request"))
				continue
			}
			if r := validName(u.User, u.Mechanism); r != nil {
				fail(*r)
				continue
			}
			switch it := u.Credential.Iterations; {
			case it < scramMinIterations:
				fail(scramFail(u.User, kerr.UnacceptableCredential, "Too few iterations"))
				continue
			case it > scramMaxIterations:
				fail(scramFail(u.User, kerr.UnacceptableCredential, "Too many iterations"))
				continue
			}
			ups[u.User] = u
		}
		var out []ScramUserResult
		var recs []log.Record
		for _, d := range deletions {
			if x, ok := dels[d.User]; ok && x == d {
				delete(dels, d.User)
				out = append(out, ScramUserResult{User: d.User})
				recs = append(recs, DeleteScramRecord(d.User, d.Mechanism))
			}
		}
		for _, u := range upsertions {
			if x, ok := ups[u.User]; ok && x.Mechanism == u.Mechanism {
				delete(ups, u.User)
				out = append(out, ScramUserResult{User: u.User})
				recs = append(recs, ScramRecord(u.User, u.Mechanism, u.Credential))
			}
		}
		for _, u := range failedOrder {
			out = append(out, failed[u])
		}
		return runtime.Result{Records: recs, Response: out}
	}
}
