package handlers

import (
	"context"
	"errors"
	"slices"

	"github.com/coordinatord/coordinatord/internal/acl"
	"github.com/coordinatord/coordinatord/internal/state/meta"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The ACL APIs (DescribeAcls 29, CreateAcls 30, DeleteAcls 31) manage the bindings the
// metadata shard keeps, so that kafka-acls.sh works against coordinatord as against a broker.

const noAuthorizerMessage = "No Authorizer is configured."

// LoadACLs installs the metadata shard's durable bindings in the authorizer: at startup, before
// any listener serves, and after every change.
func LoadACLs(ctx context.Context, m *runtime.Shard[*meta.Catalog], a *acl.Authorizer) error {
	if !a.Enabled() {
		return nil // nothing decides on them; DescribeAcls answers SECURITY_DISABLED
	}
	v, err := m.Read(ctx, meta.ReadACLs)
	if err != nil {
		return err
	}
	view := v.(meta.ACLs)
	a.Update(view.Set, view.Version)
	return nil
}

func (t *Table) refreshACLs(ctx context.Context) error {
	return LoadACLs(ctx, t.deps.Meta, t.deps.Authorizer)
}

func filterOf(rt kmsg.ACLResourceType, name *string, pt kmsg.ACLResourcePatternType, principal, host *string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType, version int16) (acl.Filter, error) {
	f := acl.Filter{Resource: acl.ResourceType(rt), Name: name, Pattern: acl.PatternType(pt), Principal: principal,
		Host: host, Operation: acl.Operation(op), Permission: acl.Permission(perm)}
	if version < 3 && f.Resource == acl.ResourceUser {
		return f, errors.New("resource type USER needs version 3 or later")
	}
	return f, f.Validate()
}

func aclError(err error) (int16, *string) {
	code := kerr.InvalidRequest.Code
	if !errors.Is(err, acl.ErrInvalid) {
		code = kerr.UnsupportedVersion.Code
	}
	msg := err.Error()
	return code, &msg
}

func (t *Table) describeACLs(ctx context.Context, r *wire.Request) kmsg.Response {
	req := r.Body.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	if !t.clusterAllowed(r, acl.OpDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp
	}
	if !t.deps.Authorizer.Enabled() {
		resp.ErrorCode, resp.ErrorMessage = kerr.SecurityDisabled.Code, strPtr(noAuthorizerMessage)
		return resp
	}
	f, err := filterOf(req.ResourceType, req.ResourceName, req.ResourcePatternType, req.Principal, req.Host, req.Operation, req.PermissionType, r.Version)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = aclError(err)
		return resp
	}
	v, err := t.deps.Meta.Read(ctx, meta.ReadACLs)
	if err != nil {
		resp.ErrorCode = availabilityCode(err)
		return resp
	}
	// The set is sorted by resource pattern, so each resource's ACLs are adjacent.
	for _, b := range v.(meta.ACLs).Set.Select(f) {
		n := len(resp.Resources)
		if n == 0 || !samePattern(resp.Resources[n-1], b) {
			res := kmsg.NewDescribeACLsResponseResource()
			res.ResourceType, res.ResourceName, res.ResourcePatternType = kmsg.ACLResourceType(b.Resource), b.Name, kmsg.ACLResourcePatternType(b.Pattern)
			resp.Resources = append(resp.Resources, res)
			n++
		}
		a := kmsg.NewDescribeACLsResponseResourceACL()
		a.Principal, a.Host, a.Operation, a.PermissionType = b.Principal.String(), b.Host, kmsg.ACLOperation(b.Operation), kmsg.ACLPermissionType(b.Permission)
		resp.Resources[n-1].ACLs = append(resp.Resources[n-1].ACLs, a)
	}
	return resp
}

func samePattern(res kmsg.DescribeACLsResponseResource, b acl.Binding) bool {
	return acl.ResourceType(res.ResourceType) == b.Resource && res.ResourceName == b.Name && acl.PatternType(res.ResourcePatternType) == b.Pattern
}

func (t *Table) createACLs(ctx context.Context, r *wire.Request) kmsg.Response {
	req := r.Body.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(req.Creations))
	all := func(code int16, msg *string) kmsg.Response {
		for i := range resp.Results {
			resp.Results[i] = kmsg.NewCreateACLsResponseResult()
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code, msg
		}
		return resp
	}
	if !t.clusterAllowed(r, acl.OpAlter) {
		return all(kerr.ClusterAuthorizationFailed.Code, nil)
	}
	if !t.deps.Authorizer.Enabled() {
		return all(kerr.SecurityDisabled.Code, strPtr(noAuthorizerMessage))
	}
	var valid []acl.Binding
	var at []int
	for i, c := range req.Creations {
		resp.Results[i] = kmsg.NewCreateACLsResponseResult()
		b := acl.Binding{Resource: acl.ResourceType(c.ResourceType), Name: c.ResourceName, Pattern: acl.PatternType(c.ResourcePatternType),
			Host: c.Host, Operation: acl.Operation(c.Operation), Permission: acl.Permission(c.PermissionType)}
		p, err := acl.ParsePrincipal(c.Principal)
		b.Principal = p
		if err == nil {
			err = b.Validate()
		}
		if err == nil && r.Version < 3 && b.Resource == acl.ResourceUser {
			err = errors.New("resource type USER needs CreateAcls version 3 or later")
		}
		if err != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = aclError(err)
			continue
		}
		valid = append(valid, b)
		at = append(at, i)
	}
	if len(valid) == 0 {
		return resp
	}
	if _, err := t.deps.Meta.Write(ctx, meta.CreateACLs(valid)); err != nil {
		for _, i := range at {
			resp.Results[i].ErrorCode = availabilityCode(err)
		}
		return resp
	}
	// Kafka answers a creation that succeeded with an empty message, not a null one.
	for _, i := range at {
		resp.Results[i].ErrorMessage = strPtr("")
	}
	if err := t.refreshACLs(ctx); err != nil {
		t.log.Warn("reading ACLs after a change failed; they take effect at the next change or restart")
	}
	return resp
}

func (t *Table) deleteACLs(ctx context.Context, r *wire.Request) kmsg.Response {
	req := r.Body.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(req.Filters))
	all := func(code int16, msg *string) kmsg.Response {
		for i := range resp.Results {
			resp.Results[i] = kmsg.NewDeleteACLsResponseResult()
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code, msg
		}
		return resp
	}
	if !t.clusterAllowed(r, acl.OpAlter) {
		return all(kerr.ClusterAuthorizationFailed.Code, nil)
	}
	if !t.deps.Authorizer.Enabled() {
		return all(kerr.SecurityDisabled.Code, strPtr(noAuthorizerMessage))
	}
	var filters []acl.Filter
	var at []int
	for i, rf := range req.Filters {
		resp.Results[i] = kmsg.NewDeleteACLsResponseResult()
		f, err := filterOf(rf.ResourceType, rf.ResourceName, rf.ResourcePatternType, rf.Principal, rf.Host, rf.Operation, rf.PermissionType, r.Version)
		if err != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = aclError(err)
			continue
		}
		filters = append(filters, f)
		at = append(at, i)
	}
	if len(filters) == 0 {
		return resp
	}
	v, err := t.deps.Meta.Write(ctx, meta.DeleteACLs(filters))
	if err != nil {
		for _, i := range at {
			resp.Results[i].ErrorCode = availabilityCode(err)
		}
		return resp
	}
	for k, matched := range v.([][]acl.Binding) {
		res := &resp.Results[at[k]]
		for _, b := range matched {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName, m.ResourcePatternType = kmsg.ACLResourceType(b.Resource), b.Name, kmsg.ACLResourcePatternType(b.Pattern)
			m.Principal, m.Host, m.Operation, m.PermissionType = b.Principal.String(), b.Host, kmsg.ACLOperation(b.Operation), kmsg.ACLPermissionType(b.Permission)
			res.MatchingACLs = append(res.MatchingACLs, m)
		}
	}
	if slices.ContainsFunc(v.([][]acl.Binding), func(m []acl.Binding) bool { return len(m) > 0 }) {
		if err := t.refreshACLs(ctx); err != nil {
			t.log.Warn("reading ACLs after a change failed; they take effect at the next change or restart")
		}
	}
	return resp
}
