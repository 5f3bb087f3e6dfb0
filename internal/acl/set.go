package acl

import (
	"net"
	"sort"
	"strconv"
	"strings"
)

// Set is an immutable collection of bindings indexed for checks.
type Set struct {
	all []Binding
	// byType holds, per resource type, the bindings that can apply to a resource name: by exact
	// literal name, the literal wildcard, and by prefix.
	byType map[ResourceType]*typeIndex
}

type typeIndex struct {
	literal  map[string][]Binding
	wildcard []Binding
	prefixed map[string][]Binding
	// prefixLens are the distinct lengths of prefixed names, so a check looks up only those
	// prefixes of a resource name that some binding could have.
	prefixLens []int
}

// NewSet indexes bindings. The slice is kept; the caller must not change it afterwards.
func NewSet(bindings []Binding) *Set {
	s := &Set{all: bindings, byType: map[ResourceType]*typeIndex{}}
	for _, b := range bindings {
		ti := s.byType[b.Resource]
		if ti == nil {
			ti = &typeIndex{literal: map[string][]Binding{}, prefixed: map[string][]Binding{}}
			s.byType[b.Resource] = ti
		}
		switch {
		case b.Pattern == PatternLiteral && b.Name == Wildcard:
			ti.wildcard = append(ti.wildcard, b)
		case b.Pattern == PatternLiteral:
			ti.literal[b.Name] = append(ti.literal[b.Name], b)
		case b.Pattern == PatternPrefixed:
			if len(ti.prefixed[b.Name]) == 0 {
				ti.prefixLens = append(ti.prefixLens, len(b.Name))
			}
			ti.prefixed[b.Name] = append(ti.prefixed[b.Name], b)
		}
	}
	for _, ti := range s.byType {
		sort.Ints(ti.prefixLens)
		ti.prefixLens = dedupe(ti.prefixLens)
	}
	return s
}

func dedupe(v []int) []int {
	out := v[:0]
	for i, x := range v {
		if i == 0 || x != v[i-1] {
			out = append(out, x)
		}
	}
	return out
}

// Len is the number of bindings.
func (s *Set) Len() int { return len(s.all) }

// Select lists the bindings the filter matches.
func (s *Set) Select(f Filter) []Binding {
	var out []Binding
	for _, b := range s.all {
		if f.Matches(b) {
			out = append(out, b)
		}
	}
	return out
}

// verdict accumulates what the bindings that apply to one resource say.
type verdict struct {
	hasResourceACLs, allow, deny bool
}

func (v *verdict) apply(bs []Binding, p Principal, host string, op Operation) {
	for i := range bs {
		v.hasResourceACLs = true
		switch applies(&bs[i], p, host, op) {
		case Allow:
			v.allow = true
		case Deny:
			v.deny = true
		}
	}
}

// decide applies StandardAuthorizer's rules: any applicable DENY wins, then any ALLOW; with
// no binding on the resource at all, the no-ACL default; bindings only for others deny.
func (s *Set) decide(p Principal, host string, r ResourceType, name string, op Operation, allowIfNoACL bool) bool {
	ti := s.byType[r]
	if ti == nil {
		return allowIfNoACL
	}
	var v verdict
	v.apply(ti.literal[name], p, host, op)
	v.apply(ti.wildcard, p, host, op)
	for _, n := range ti.prefixLens {
		if n > len(name) {
			break
		}
		v.apply(ti.prefixed[name[:n]], p, host, op)
	}
	switch {
	case v.deny:
		return false
	case v.allow:
		return true
	case !v.hasResourceACLs:
		return allowIfNoACL
	}
	return false
}

// applies returns the binding's permission if it applies to the principal, host and
// operation, else PermissionUnknown. Only ALLOW bindings imply: READ, WRITE, DELETE and ALTER
// imply DESCRIBE, ALTER_CONFIGS implies DESCRIBE_CONFIGS; a DENY of READ does not deny DESCRIBE.
func applies(b *Binding, p Principal, host string, op Operation) Permission {
	if b.Principal != p && b.Principal != wildcardPrincipal {
		return PermissionUnknown
	}
	if b.Host != Wildcard && b.Host != host {
		return PermissionUnknown
	}
	if b.Operation != OpAll && b.Operation != op {
		if b.Permission != Allow {
			return PermissionUnknown
		}
		switch op {
		case OpDescribe:
			if b.Operation != OpRead && b.Operation != OpWrite && b.Operation != OpDelete && b.Operation != OpAlter {
				return PermissionUnknown
			}
		case OpDescribeConfigs:
			if b.Operation != OpAlterConfigs {
				return PermissionUnknown
			}
		default:
			return PermissionUnknown
		}
	}
	return b.Permission
}

// HostOf is the host string ACLs are matched against: the client's IP address as Java prints
// it (InetAddress.getHostAddress), so that ACLs written for a Kafka broker match here too:
// IPv4 dotted, IPv6 as eight groups of hex without zero compression (0:0:0:0:0:0:0:1).
func HostOf(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if i := strings.IndexByte(host, '%'); i >= 0 {
		host = host[:i] // a zone; Java would print its scope id, which no ACL names
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return host
	}
	return HostOfIP(ip)
}

// HostOfIP is HostOf for an address already parsed (a TCP connection's peer).
func HostOfIP(ip net.IP) string {
	if v4 := ip.To4(); v4 != nil {
		return v4.String()
	}
	var b strings.Builder
	for i := 0; i < 16; i += 2 {
		if i > 0 {
			b.WriteByte(':')
		}
		b.WriteString(strconv.FormatUint(uint64(ip[i])<<8|uint64(ip[i+1]), 16))
	}
	return b.String()
}
