// Package acl is coordinatord's authorizer: Kafka's StandardAuthorizer rules (ACL bindings with
// LITERAL and PREFIXED patterns, ALLOW/DENY with DENY winning, implied operations, the User:*
// principal and * host wildcards, super.users, allow.everyone.if.no.acl.found) over an
// immutable set of bindings that the metadata shard owns and replaces on every change.
package acl

import (
	"errors"
	"fmt"
	"strings"
)

// ResourceType is Kafka's resource type code (AclResourceType / ResourceType.java).
type ResourceType int8

const (
	ResourceUnknown         ResourceType = 0
	ResourceAny             ResourceType = 1 // filters only
	ResourceTopic           ResourceType = 2
	ResourceGroup           ResourceType = 3
	ResourceCluster         ResourceType = 4
	ResourceTransactionalID ResourceType = 5
	ResourceDelegationToken ResourceType = 6
	ResourceUser            ResourceType = 7
)

var resourceNames = map[ResourceType]string{
	ResourceUnknown: "UNKNOWN", ResourceAny: "ANY", ResourceTopic: "TOPIC", ResourceGroup: "GROUP",
	ResourceCluster: "CLUSTER", ResourceTransactionalID: "TRANSACTIONAL_ID",
	ResourceDelegationToken: "DELEGATION_TOKEN", ResourceUser: "USER",
}

func (r ResourceType) String() string {
	if s, ok := resourceNames[r]; ok {
		return s
	}
	return fmt.Sprintf("RESOURCE_TYPE(%d)", int8(r))
}

// PatternType is Kafka's pattern type code.
type PatternType int8

const (
	PatternUnknown  PatternType = 0
	PatternAny      PatternType = 1 // filters only
	PatternMatch    PatternType = 2 // filters only
	PatternLiteral  PatternType = 3
	PatternPrefixed PatternType = 4
)

func (p PatternType) String() string {
	switch p {
	case PatternAny:
		return "ANY"
	case PatternMatch:
		return "MATCH"
	case PatternLiteral:
		return "LITERAL"
	case PatternPrefixed:
		return "PREFIXED"
	}
	return "UNKNOWN"
}

// Operation is Kafka's ACL operation code.
type Operation int8

const (
	OpUnknown         Operation = 0
	OpAny             Operation = 1 // filters only
	OpAll             Operation = 2
	OpRead            Operation = 3
	OpWrite           Operation = 4
	OpCreate          Operation = 5
	OpDelete          Operation = 6
	OpAlter           Operation = 7
	OpDescribe        Operation = 8
	OpClusterAction   Operation = 9
	OpDescribeConfigs Operation = 10
	OpAlterConfigs    Operation = 11
	OpIdempotentWrite Operation = 12
	OpCreateTokens    Operation = 13
	OpDescribeTokens  Operation = 14
	OpTwoPhaseCommit  Operation = 15
)

var opNames = [...]string{"UNKNOWN", "ANY", "ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE",
	"CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "CREATE_TOKENS", "DESCRIBE_TOKENS", "TWO_PHASE_COMMIT"}

func (o Operation) String() string {
	if o >= 0 && int(o) < len(opNames) {
		return opNames[o]
	}
	return fmt.Sprintf("OPERATION(%d)", int8(o))
}

// Permission is Kafka's permission type code.
type Permission int8

const (
	PermissionUnknown Permission = 0
	PermissionAny     Permission = 1 // filters only
	Deny              Permission = 2
	Allow             Permission = 3
)

func (p Permission) String() string {
	switch p {
	case PermissionAny:
		return "ANY"
	case Deny:
		return "DENY"
	case Allow:
		return "ALLOW"
	}
	return "UNKNOWN"
}

// ClusterName is the only name of the CLUSTER resource.
const ClusterName = "kafka-cluster"

// Wildcard is the literal resource name, host and principal name that match everything.
const Wildcard = "*"

// Principal is an identity as Kafka names it: "User:alice" is {User, alice}.
type Principal struct{ Type, Name string }

func (p Principal) String() string { return p.Type + ":" + p.Name }

// ParsePrincipal reads "Type:name" (the name may itself contain ':').
func ParsePrincipal(s string) (Principal, error) {
	t, n, ok := strings.Cut(s, ":")
	if !ok || t == "" {
		return Principal{}, invalid("could not parse principal from `%s` (no colon is found separating principal type from principal name)", s)
	}
	return Principal{Type: t, Name: n}, nil
}

// wildcardPrincipal is User:*, the only principal wildcard Kafka knows.
var wildcardPrincipal = Principal{Type: "User", Name: Wildcard}

// Binding is one ACL: a resource pattern and an access control entry.
type Binding struct {
	Resource   ResourceType
	Name       string
	Pattern    PatternType
	Principal  Principal
	Host       string
	Operation  Operation
	Permission Permission
}

func (b Binding) String() string {
	return fmt.Sprintf("(resourceType=%s, name=%s, patternType=%s) (principal=%s, host=%s, operation=%s, permissionType=%s)",
		b.Resource, b.Name, b.Pattern, b.Principal, b.Host, b.Operation, b.Permission)
}

// ErrInvalid marks a binding or filter Kafka would refuse with INVALID_REQUEST.
var ErrInvalid = errors.New("invalid acl")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// Validate applies Kafka's rules for a binding to be created (AclApis.handleCreateAcls and
// AclControlManager.validateNewAcl).
func (b Binding) Validate() error {
	switch {
	case b.Resource < ResourceTopic || b.Resource > ResourceUser:
		return invalid("Invalid resourceType %s", b.Resource)
	case b.Pattern != PatternLiteral && b.Pattern != PatternPrefixed:
		return invalid("Invalid patternType %s", b.Pattern)
	case b.Operation < OpAll || b.Operation > OpTwoPhaseCommit:
		return invalid("Invalid operation %s", b.Operation)
	case b.Permission != Allow && b.Permission != Deny:
		return invalid("Invalid permissionType %s", b.Permission)
	case b.Name == "":
		return invalid("Invalid empty resource name")
	case b.Resource == ResourceCluster && b.Name != ClusterName:
		return invalid("The only valid name for the CLUSTER resource is %s", ClusterName)
	case b.Principal.Type == "":
		return invalid("Invalid principal")
	case b.Host == "":
		return invalid("Invalid empty host")
	}
	// Kafka accepts any host string (one that is no IP address matches nothing).
	return nil
}

// Filter selects bindings for DescribeAcls and DeleteAcls. A nil string matches any value;
// the ANY codes match any value of their field; PatternMatch matches every binding that
// applies to a resource of that name.
type Filter struct {
	Resource   ResourceType
	Name       *string
	Pattern    PatternType
	Principal  *string
	Host       *string
	Operation  Operation
	Permission Permission
}

// Validate rejects filters with UNKNOWN codes, which Kafka refuses while parsing.
func (f Filter) Validate() error {
	switch {
	case f.Resource == ResourceUnknown || f.Resource > ResourceUser || f.Resource < 0:
		return invalid("Invalid resourceType %s", f.Resource)
	case f.Pattern == PatternUnknown || f.Pattern > PatternPrefixed || f.Pattern < 0:
		return invalid("Invalid patternType %s", f.Pattern)
	case f.Operation == OpUnknown || f.Operation > OpTwoPhaseCommit || f.Operation < 0:
		return invalid("Invalid operation %s", f.Operation)
	case f.Permission == PermissionUnknown || f.Permission > Allow || f.Permission < 0:
		return invalid("Invalid permissionType %s", f.Permission)
	}
	return nil
}

// Matches says whether the filter selects the binding.
func (f Filter) Matches(b Binding) bool {
	if f.Resource != ResourceAny && f.Resource != b.Resource {
		return false
	}
	if !f.matchesPattern(b) {
		return false
	}
	if f.Principal != nil && *f.Principal != b.Principal.String() {
		return false
	}
	if f.Host != nil && *f.Host != b.Host {
		return false
	}
	if f.Operation != OpAny && f.Operation != b.Operation {
		return false
	}
	return f.Permission == PermissionAny || f.Permission == b.Permission
}

func (f Filter) matchesPattern(b Binding) bool {
	switch f.Pattern {
	case PatternAny:
		return f.Name == nil || *f.Name == b.Name
	case PatternMatch:
		if f.Name == nil {
			return true
		}
		n := *f.Name
		switch b.Pattern {
		case PatternLiteral:
			return b.Name == n || b.Name == Wildcard
		case PatternPrefixed:
			return strings.HasPrefix(n, b.Name)
		}
		return false
	default:
		return f.Pattern == b.Pattern && (f.Name == nil || *f.Name == b.Name)
	}
}

// SupportedOperations are the operations Kafka reports in authorized-operations bitfields
// for a resource type (AclEntry.supportedOperations).
func SupportedOperations(r ResourceType) []Operation {
	switch r {
	case ResourceTopic:
		return []Operation{OpRead, OpWrite, OpCreate, OpDescribe, OpDelete, OpAlter, OpDescribeConfigs, OpAlterConfigs}
	case ResourceGroup:
		return []Operation{OpRead, OpDescribe, OpDelete, OpDescribeConfigs, OpAlterConfigs}
	case ResourceCluster:
		return []Operation{OpCreate, OpClusterAction, OpDescribeConfigs, OpAlterConfigs, OpIdempotentWrite, OpAlter, OpDescribe}
	case ResourceTransactionalID:
		return []Operation{OpDescribe, OpWrite, OpTwoPhaseCommit}
	case ResourceDelegationToken:
		return []Operation{OpDescribe}
	case ResourceUser:
		return []Operation{OpCreateTokens, OpDescribeTokens}
	}
	return nil
}
