package upstream

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeAllACLs reads every ACL binding of the upstream cluster (a filter matching all), as
// coordinatord's own principal: that principal needs CLUSTER DESCRIBE upstream. The upstream's
// error (CLUSTER_AUTHORIZATION_FAILED, SECURITY_DISABLED) comes back as an error.
func (c *Client) DescribeAllACLs(ctx context.Context) ([]kmsg.DescribeACLsResponseResource, error) {
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType = kmsg.ACLResourceTypeAny
	req.ResourcePatternType = kmsg.ACLResourcePatternTypeAny
	req.Operation = kmsg.ACLOperationAny
	req.PermissionType = kmsg.ACLPermissionTypeAny
	resp, err := req.RequestWith(ctx, c.kc)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		if resp.ErrorMessage != nil && *resp.ErrorMessage != "" {
			return nil, &ACLError{Err: err, Message: *resp.ErrorMessage}
		}
		return nil, err
	}
	return resp.Resources, nil
}

// ACLError is an upstream's refusal of DescribeAcls with its message.
type ACLError struct {
	Err     error
	Message string
}

func (e *ACLError) Error() string { return e.Err.Error() + ": " + e.Message }
func (e *ACLError) Unwrap() error { return e.Err }
