package config

import (
	"errors"
	"strconv"
	"strings"
)

// StandardAuthorizer is the one authorizer.class.name coordinatord implements: Kafka's KRaft
// authorizer, whose rules internal/acl follows.
const StandardAuthorizer = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

// AuthorizerConfig is the ACL authorizer's configuration (authorizer.class.name and friends).
type AuthorizerConfig struct {
	// Enabled: authorizer.class.name is set. As in Kafka, nothing is authorized without it.
	Enabled bool
	// SuperUsers are principal strings ("User:admin").
	SuperUsers []string
	// AllowEveryoneIfNoACL: allow.everyone.if.no.acl.found.
	AllowEveryoneIfNoACL bool
}

var authorizerKeys = []key{
	{"authorizer.class.name", "", "Empty: no authorization, every client may do everything (Kafka's behaviour without an authorizer). " + StandardAuthorizer + ": check ACLs (kafka-acls.sh) on every request, as Kafka's StandardAuthorizer does. Standalone mode only.",
		func(c *Config, v string) error {
			switch strings.TrimSpace(v) {
			case "":
				c.Authorizer.Enabled = false
			case StandardAuthorizer:
				c.Authorizer.Enabled = true
			default:
				return errors.New("must be empty or " + StandardAuthorizer)
			}
			return nil
		}},
	{"super.users", "", "Semicolon-separated principals (User:admin;User:ops) allowed everything whatever the ACLs say.",
		func(c *Config, v string) error {
			c.Authorizer.SuperUsers = nil
			for _, p := range strings.Split(v, ";") {
				p = strings.TrimSpace(p)
				if p == "" {
					continue
				}
				if t, _, ok := strings.Cut(p, ":"); !ok || t == "" {
					return errors.New("each principal must be Type:name, as User:admin")
				}
				c.Authorizer.SuperUsers = append(c.Authorizer.SuperUsers, p)
			}
			return nil
		}},
	{"allow.everyone.if.no.acl.found", "false", "With an authorizer, allow every principal an operation on a resource that has no ACL at all (a resource with ACLs for others stays denied).",
		func(c *Config, v string) error {
			b, err := strconv.ParseBool(strings.TrimSpace(v))
			if err != nil {
				return errors.New("must be true or false")
			}
			c.Authorizer.AllowEveryoneIfNoACL = b
			return nil
		}},
}

func init() { keys = append(keys, authorizerKeys...) }

// validateAuthorizer refuses ACLs in gateway mode, where the group APIs must follow the
// upstream cluster's ACLs rather than a second set kept here.
func (c *Config) validateAuthorizer() error {
	if c.Authorizer.Enabled && c.Gateway.Enabled() {
		return &KeyError{Key: "authorizer.class.name", Value: c.values["authorizer.class.name"],
			Reason: "is not supported in gateway mode yet (upstream.bootstrap.servers is set)"}
	}
	return nil
}
