package gateway

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/acl"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func upstreamACL(rt kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType, principal string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) kmsg.DescribeACLsResponseResource {
	r := kmsg.NewDescribeACLsResponseResource()
	r.ResourceType, r.ResourceName, r.ResourcePatternType = rt, name, pt
	e := kmsg.NewDescribeACLsResponseResourceACL()
	e.Principal, e.Host, e.Operation, e.PermissionType = principal, "*", op, perm
	r.ACLs = append(r.ACLs, e)
	return r
}

var alice = acl.Principal{Type: "User", Name: "alice"}

// The upstream's bindings decide the group APIs: what they allow is allowed, what they do not
// is denied, DENY winning and prefixes applying as upstream.
func TestACLMirrorAppliesUpstreamBindings(t *testing.T) {
	a := acl.New(acl.Config{Enabled: true})
	m := NewACLMirror(ACLMirrorOptions{Authorizer: a, Interval: time.Hour,
		Fetch: func(context.Context) ([]kmsg.DescribeACLsResponseResource, error) {
			return []kmsg.DescribeACLsResponseResource{
				upstreamACL(kmsg.ACLResourceTypeGroup, "app-", kmsg.ACLResourcePatternTypePrefixed, "User:alice", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow),
				upstreamACL(kmsg.ACLResourceTypeGroup, "app-secret", kmsg.ACLResourcePatternTypeLiteral, "User:alice", kmsg.ACLOperationAll, kmsg.ACLPermissionTypeDeny),
				upstreamACL(kmsg.ACLResourceTypeGroup, "x", kmsg.ACLResourcePatternTypeLiteral, "no-type", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow),
			}, nil
		}})
	defer m.Close()
	if err := m.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		group string
		want  bool
	}{{"app-1", true}, {"app-secret", false}, {"other", false}, {"x", false}} {
		if got := a.Authorize(alice, "127.0.0.1", acl.ResourceGroup, c.group, acl.OpRead); got != c.want {
			t.Errorf("READ group %s: %v, want %v", c.group, got, c.want)
		}
	}
	if n := a.Bindings().Len(); n != 2 {
		t.Errorf("%d bindings installed, want 2 (the one without a principal type left out)", n)
	}
}

// A denial reads the upstream again, so an ACL added there applies on the client's retry
// without waiting for the interval; a failed read keeps the last bindings in force.
func TestACLMirrorRereadsOnDenialAndKeepsBindingsOnFailure(t *testing.T) {
	a := acl.New(acl.Config{Enabled: true})
	var granted, failing atomic.Bool
	var reads atomic.Int32
	m := NewACLMirror(ACLMirrorOptions{Authorizer: a, Interval: time.Hour, MinGap: time.Millisecond,
		Fetch: func(context.Context) ([]kmsg.DescribeACLsResponseResource, error) {
			reads.Add(1)
			if failing.Load() {
				return nil, errors.New("upstream unreachable")
			}
			if !granted.Load() {
				return nil, nil
			}
			return []kmsg.DescribeACLsResponseResource{
				upstreamACL(kmsg.ACLResourceTypeGroup, "g", kmsg.ACLResourcePatternTypeLiteral, "User:alice", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow),
			}, nil
		}})
	a.SetOnDenied(m.Denied)
	if err := m.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	m.Start()
	defer m.Close()
	if a.Authorize(alice, "h", acl.ResourceGroup, "g", acl.OpRead) {
		t.Fatal("allowed before the ACL exists upstream")
	}
	granted.Store(true)
	// Each denial asks for a read; the interval is an hour, so only that read can grant it. The
	// deadline only turns a hang into a failure.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for !a.Authorize(alice, "h", acl.ResourceGroup, "g", acl.OpRead) {
		if ctx.Err() != nil {
			t.Fatal("the ACL added upstream never applied: a denial did not read the upstream again")
		}
		time.Sleep(time.Millisecond)
	}
	failing.Store(true)
	before := reads.Load()
	a.Authorize(bob(), "h", acl.ResourceGroup, "g", acl.OpRead) // a denial: a read that fails
	for reads.Load() == before {
		if ctx.Err() != nil {
			t.Fatal("a denial did not read the upstream again")
		}
		time.Sleep(time.Millisecond)
	}
	m.Close() // the failed read has returned once Close does
	if !a.Authorize(alice, "h", acl.ResourceGroup, "g", acl.OpRead) {
		t.Fatal("a failed read dropped the bindings read before")
	}
}

func bob() acl.Principal { return acl.Principal{Type: "User", Name: "bob"} }

// An upstream refusal at start-up is an error for the caller (which refuses to start), not an
// empty set that would deny or allow everything.
func TestACLMirrorLoadReportsUpstreamRefusal(t *testing.T) {
	a := acl.New(acl.Config{Enabled: true})
	m := NewACLMirror(ACLMirrorOptions{Authorizer: a, Interval: time.Hour,
		Fetch: func(context.Context) ([]kmsg.DescribeACLsResponseResource, error) {
			return nil, errors.New("CLUSTER_AUTHORIZATION_FAILED")
		}})
	defer m.Close()
	if err := m.Load(context.Background()); err == nil {
		t.Fatal("Load succeeded on a refusal")
	}
}

// Reread applies an ACL revoked upstream before it returns, though neither the interval nor a
// denial would read again for an hour; a second read follows.
func TestACLMirrorRereadAppliesARevocationAtOnce(t *testing.T) {
	a := acl.New(acl.Config{Enabled: true})
	var revoked atomic.Bool
	var reads atomic.Int32
	m := NewACLMirror(ACLMirrorOptions{Authorizer: a, Interval: time.Hour, MinGap: time.Hour, FollowUp: 20 * time.Millisecond,
		Fetch: func(context.Context) ([]kmsg.DescribeACLsResponseResource, error) {
			reads.Add(1)
			if revoked.Load() {
				return nil, nil
			}
			return []kmsg.DescribeACLsResponseResource{
				upstreamACL(kmsg.ACLResourceTypeGroup, "g", kmsg.ACLResourcePatternTypeLiteral, "User:alice", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow),
			}, nil
		}})
	if err := m.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	m.Start()
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	revoked.Store(true)
	if err := m.Reread(ctx); err != nil {
		t.Fatal(err)
	}
	if a.Authorize(alice, "h", acl.ResourceGroup, "g", acl.OpRead) {
		t.Fatal("an ACL revoked upstream is still in force after Reread returned")
	}
	for reads.Load() < 3 {
		select {
		case <-ctx.Done():
			t.Fatalf("%d reads, want the follow-up read after the Reread's", reads.Load())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// A burst of ACL changes while a read is under way costs one more read, not one each: a
// client creating ACLs in a loop must not turn into as many DescribeAcls on every node.
func TestACLMirrorRereadsOfABurstShareOneRead(t *testing.T) {
	var reads atomic.Int32
	gate := make(chan struct{})
	m := NewACLMirror(ACLMirrorOptions{Authorizer: acl.New(acl.Config{Enabled: true}), Interval: time.Hour, MinGap: time.Hour, FollowUp: time.Hour,
		Fetch: func(context.Context) ([]kmsg.DescribeACLsResponseResource, error) {
			if reads.Add(1) == 1 {
				<-gate
			}
			return nil, nil
		}})
	m.Start()
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first := make(chan error, 1)
	go func() { first <- m.Reread(ctx) }()
	for reads.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := m.Reread(ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	time.Sleep(100 * time.Millisecond) // let them all ask while the first read is held
	close(gate)
	wg.Wait()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if n := reads.Load(); n != 2 {
		t.Fatalf("a burst of 11 changes made %d reads, want 2 (the one under way and one they share)", n)
	}
}
