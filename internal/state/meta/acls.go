package meta

import (
	"fmt"
	"slices"

	"github.com/coordinatord/coordinatord/internal/acl"
	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/records"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
)

// ACLs is the durable set of ACL bindings and the log offset of the last change in it; the
// authorizer installs a view only if it is newer than the one it applies.
type ACLs struct {
	Set     *acl.Set
	Version int64
}

// aclKey is the record key of a binding: the binding itself, so that creating one twice is
// one record and a tombstone removes exactly it.
func aclKey(b acl.Binding) []byte {
	return records.NewKey(records.KindACL).Int16(int16(b.Resource)).String(b.Name).Int16(int16(b.Pattern)).
		String(b.Principal.Type).String(b.Principal.Name).String(b.Host).Int16(int16(b.Operation)).Int16(int16(b.Permission)).Build()
}

func decodeACLKey(key []byte) (acl.Binding, error) {
	r, err := records.ReadKey(key, records.KindACL)
	if err != nil {
		return acl.Binding{}, err
	}
	b := acl.Binding{Resource: acl.ResourceType(r.Int16()), Name: r.String(), Pattern: acl.PatternType(r.Int16())}
	b.Principal = acl.Principal{Type: r.String(), Name: r.String()}
	b.Host = r.String()
	b.Operation, b.Permission = acl.Operation(r.Int16()), acl.Permission(r.Int16())
	if err := r.Err(); err != nil {
		return acl.Binding{}, fmt.Errorf("acl binding key: %w", err)
	}
	return b, nil
}

// ACLRecord creates a binding.
func ACLRecord(b acl.Binding) log.Record {
	return log.Record{Key: aclKey(b), Value: records.NewValue(0).Build()}
}

// DeleteACLRecord removes a binding.
func DeleteACLRecord(b acl.Binding) log.Record { return log.Record{Key: aclKey(b)} }

func (c *Catalog) replayACL(offset int64, rec log.Record) error {
	b, err := decodeACLKey(rec.Key)
	if err != nil {
		return err
	}
	if rec.Tombstone() {
		delete(c.acls, b)
	} else {
		if version, _, err := records.ReadValue(rec.Value); err != nil {
			return err
		} else if err := records.CheckVersion(records.KindACL, version, 0); err != nil {
			return fmt.Errorf("binding %s: %w", b, err)
		}
		c.acls[b] = struct{}{}
	}
	c.aclVersion = max(c.aclVersion, offset)
	c.aclSnap = nil
	return nil
}

// ACLView is the current bindings; like Snapshot it is built once per change someone reads.
func (c *Catalog) ACLView() ACLs {
	if c.aclSnap == nil {
		bs := make([]acl.Binding, 0, len(c.acls))
		for b := range c.acls {
			bs = append(bs, b)
		}
		slices.SortFunc(bs, compareBindings)
		c.aclSnap = acl.NewSet(bs)
	}
	return ACLs{Set: c.aclSnap, Version: c.aclVersion}
}

func compareBindings(a, b acl.Binding) int {
	if a.Resource != b.Resource {
		return int(a.Resource) - int(b.Resource)
	}
	if a.Name != b.Name {
		if a.Name < b.Name {
			return -1
		}
		return 1
	}
	if a.Pattern != b.Pattern {
		return int(a.Pattern) - int(b.Pattern)
	}
	if s, t := a.Principal.String(), b.Principal.String(); s != t {
		if s < t {
			return -1
		}
		return 1
	}
	if a.Host != b.Host {
		if a.Host < b.Host {
			return -1
		}
		return 1
	}
	if a.Operation != b.Operation {
		return int(a.Operation) - int(b.Operation)
	}
	return int(a.Permission) - int(b.Permission)
}

// ReadACLs is the read operation returning the durable ACLs.
func ReadACLs(c *Catalog) (any, error) { return c.ACLView(), nil }

// CreateACLs adds bindings (already validated). A binding that exists already is kept as it
// is: creating it again succeeds and writes nothing, as in Kafka.
func CreateACLs(bs []acl.Binding) runtime.WriteOp[*Catalog] {
	return func(_ *runtime.Ctx[*Catalog], c *Catalog) runtime.Result {
		var recs []log.Record
		seen := map[acl.Binding]bool{}
		for _, b := range bs {
			if _, ok := c.acls[b]; ok || seen[b] {
				continue
			}
			seen[b] = true
			recs = append(recs, ACLRecord(b))
		}
		return runtime.Result{Records: recs}
	}
}

// DeleteACLs removes every binding a filter matches. The response ([][]acl.Binding) lists,
// per filter, the bindings it matched; a binding matched by two filters is deleted once.
func DeleteACLs(filters []acl.Filter) runtime.WriteOp[*Catalog] {
	return func(_ *runtime.Ctx[*Catalog], c *Catalog) runtime.Result {
		set := c.ACLView().Set
		out := make([][]acl.Binding, len(filters))
		var recs []log.Record
		gone := map[acl.Binding]bool{}
		for i, f := range filters {
			out[i] = set.Select(f)
			for _, b := range out[i] {
				if !gone[b] {
					gone[b] = true
					recs = append(recs, DeleteACLRecord(b))
				}
			}
		}
		return runtime.Result{Records: recs, Response: out}
	}
}
