package config

import (
	"errors"
	"strconv"
	"strings"
	"time"
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
	// UpstreamRefresh is how often gateway mode reads the upstream's ACLs again
	// (upstream.acls.refresh.interval.ms).
	UpstreamRefresh time.Duration
}

var authorizerKeys = []key{
	{"authorizer.class.name", "", "Empty: no authorization, every client may do everything (Kafka's behaviour without an authorizer). " + StandardAuthorizer + ": check ACLs (kafka-acls.sh) on every request, as Kafka's StandardAuthorizer does. In gateway mode the ACLs are the upstream cluster's, read with DescribeAcls (see upstream.acls.refresh.interval.ms).",
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
	{"upstream.acls.refresh.interval.ms", "30000", "Gateway mode with authorizer.class.name: how often the upstream cluster's ACLs are read again (DescribeAcls, which coordinatord's upstream principal needs CLUSTER DESCRIBE for). A denial also reads them at once, at most once a second, so an ACL just added upstream with kafka-acls.sh applies on the client's next retry; a CreateAcls/DeleteAcls sent through coordinatord is read at once on every node before its answer.",
		func(c *Config, v string) (err error) {
			c.Authorizer.UpstreamRefresh, err = parseMillis(v, 1000)
			return
		}},
}

func init() { keys = append(keys, authorizerKeys...) }
