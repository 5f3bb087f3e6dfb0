package meta

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/coordinatord/coordinatord/internal/acl"
	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/records"
	"github.com/twmb/franz-go/pkg/kerr"
)

func alterScram(t *testing.T, c *Catalog, dels []ScramDeletion, ups []ScramUpsertion) map[string]ScramUserResult {
	t.Helper()
	r := AlterScram(dels, ups)(nil, c)
	for _, rec := range r.Records {
		if err := c.Replay(0, rec); err != nil {
			t.Fatal(err)
		}
	}
	out := map[string]ScramUserResult{}
	for _, u := range r.Response.([]ScramUserResult) {
		if _, dup := out[u.User]; dup {
			t.Fatalf("user %s answered twice", u.User)
		}
		out[u.User] = u
	}
	return out
}

func cred(iterations int32) ScramCredential {
	return ScramCredential{Salt: []byte("salt"), Iterations: iterations, StoredKey: []byte("stored"), ServerKey: []byte("server")}
}

// AlterUserScramCredentials follows Kafka's ScramControlManager: one result per user, a user
// altered twice in a request is refused, iterations bounded, unknown deletions refused.
func TestAlterScramKafkaRules(t *testing.T) {
	c := NewCatalog()
	res := alterScram(t, c, nil, []ScramUpsertion{
		{User: "alice", Mechanism: 1, Credential: cred(4096)},
		{User: "bob", Mechanism: 2, Credential: cred(8192)},
		{User: "bob", Mechanism: 1, Credential: cred(8192)},
		{User: "", Mechanism: 1, Credential: cred(4096)},
		{User: "carol", Mechanism: 3, Credential: cred(4096)},
		{User: "dave", Mechanism: 1, Credential: cred(4095)},
		{User: "erin", Mechanism: 1, Credential: cred(16385)},
	})
	want := map[string]int16{
		"alice": 0, "bob": kerr.DuplicateResource.Code, "": kerr.UnacceptableCredential.Code,
		"carol": kerr.UnsupportedSaslMechanism.Code, "dave": kerr.UnacceptableCredential.Code, "erin": kerr.UnacceptableCredential.Code,
	}
	if len(res) != len(want) {
		t.Fatalf("results %+v", res)
	}
	for u, code := range want {
		if res[u].Code != code {
			t.Errorf("%q: code %d, want %d", u, res[u].Code, code)
		}
	}
	got, _ := LookupScram("alice", 1)(c)
	if l := got.(ScramLookup); !l.Found || !bytes.Equal(l.Credential.StoredKey, []byte("stored")) || l.Credential.Iterations != 4096 {
		t.Fatalf("alice after the alter: %+v", l)
	}
	if l, _ := LookupScram("bob", 2)(c); l.(ScramLookup).Found {
		t.Fatal("bob's refused upsertion was stored")
	}

	res = alterScram(t, c, []ScramDeletion{{User: "alice", Mechanism: 2}}, nil)
	if res["alice"].Code != kerr.ResourceNotFound.Code {
		t.Fatalf("deleting a missing credential: %+v", res["alice"])
	}
	res = alterScram(t, c, []ScramDeletion{{User: "alice", Mechanism: 1}}, nil)
	if res["alice"].Code != 0 {
		t.Fatalf("delete: %+v", res["alice"])
	}
	if l, _ := LookupScram("alice", 1)(c); l.(ScramLookup).Found {
		t.Fatal("deleted credential still found")
	}
}

func TestDescribeScram(t *testing.T) {
	c := NewCatalog()
	alterScram(t, c, nil, []ScramUpsertion{{User: "alice", Mechanism: 2, Credential: cred(5000)}})
	alterScram(t, c, nil, []ScramUpsertion{{User: "alice", Mechanism: 1, Credential: cred(4096)}, {User: "bob", Mechanism: 1, Credential: cred(4096)}})
	v, _ := DescribeScram(nil, true)(c)
	all := v.([]ScramUserResult)
	if len(all) != 2 || all[0].User != "alice" || len(all[0].Infos) != 2 || all[0].Infos[0] != (ScramInfo{1, 4096}) || all[0].Infos[1] != (ScramInfo{2, 5000}) {
		t.Fatalf("describe all: %+v", all)
	}
	v, _ = DescribeScram([]string{"bob", "nobody", "alice", "alice"}, false)(c)
	got := v.([]ScramUserResult)
	if len(got) != 3 || got[0].User != "bob" || got[0].Code != 0 ||
		got[1].User != "nobody" || got[1].Code != kerr.ResourceNotFound.Code ||
		got[2].User != "alice" || got[2].Code != kerr.DuplicateResource.Code {
		t.Fatalf("describe named: %+v", got)
	}
}

// The record is the whole credential: replayed into a fresh catalog (a restart) it is the same.
func TestScramRecordRoundTrip(t *testing.T) {
	c := NewCatalog()
	rec := ScramRecord("al,ice=", 2, cred(4096))
	if err := c.Replay(0, rec); err != nil {
		t.Fatal(err)
	}
	l, _ := LookupScram("al,ice=", 2)(c)
	if got := l.(ScramLookup); !got.Found || !bytes.Equal(got.Credential.Salt, []byte("salt")) || !bytes.Equal(got.Credential.ServerKey, []byte("server")) {
		t.Fatalf("replayed: %+v", got)
	}
	if err := c.Replay(0, DeleteScramRecord("al,ice=", 2)); err != nil {
		t.Fatal(err)
	}
	if l, _ := LookupScram("al,ice=", 2)(c); l.(ScramLookup).Found {
		t.Fatal("tombstone did not delete")
	}
	if err := c.Replay(0, rawRecord(rec.Key, []byte{0, 9})); err == nil {
		t.Fatal("unknown value version accepted")
	}
}

func rawRecord(key, value []byte) log.Record { return log.Record{Key: key, Value: value} }

// A metadata record whose value version is newer than this build reads (a downgrade) fails
// the replay with an error naming its kind and saying a newer coordinatord wrote it, never
// read with the old layout.
func TestMetadataRecordsOfANewerValueVersionAreRefused(t *testing.T) {
	b := acl.Binding{Resource: acl.ResourceGroup, Name: "g", Pattern: acl.PatternLiteral, Principal: acl.Principal{Type: "User", Name: "alice"}, Host: "*", Operation: acl.OpRead, Permission: acl.Allow}
	for _, rec := range []log.Record{
		ACLRecord(b),
		ScramRecord("alice", 2, cred(4096)),
		TopicRecord(&Topic{Name: "t", ID: [16]byte{1}, Partitions: 3, ReplicationFactor: 1}),
	} {
		kind, _ := records.KindOf(rec.Key)
		newer := append([]byte(nil), rec.Value...)
		binary.BigEndian.PutUint16(newer, binary.BigEndian.Uint16(newer)+1)
		err := NewCatalog().Replay(0, rawRecord(rec.Key, newer))
		if !errors.Is(err, records.ErrNewerValue) || !strings.Contains(err.Error(), kind.String()) {
			t.Errorf("%s at value version %d: %v, want a refusal naming the kind", kind, binary.BigEndian.Uint16(newer), err)
		}
	}
}
