package handlers

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/coordinatord/coordinatord/internal/state/consumer"
	"github.com/coordinatord/coordinatord/internal/state/shard"
	"github.com/coordinatord/coordinatord/internal/state/streams"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// Configs of GROUP resources (Kafka 4.4's group configs, KIP-848/KIP-1071) and of
// coordinatord's own BROKER resource, for DescribeConfigs (32), AlterConfigs (33) and
// IncrementalAlterConfigs (44). Any other resource gets INVALID_REQUEST here; in gateway mode
// the gateway sends those upstream and never lets them reach the table.

// BrokerConfig is one effective configuration key of this process, for DescribeConfigs of the
// BROKER resource named by this node's id and for the synonyms of group configs.
type BrokerConfig struct {
	Name, Value, Doc string
	// Explicit: set in the config file or with --set (STATIC_BROKER_CONFIG), not a default.
	Explicit bool
}

// Config sources of DescribeConfigs (Kafka's DescribeConfigsResponse.ConfigSource).
const (
	sourceStaticBroker int8 = 4
	sourceDefault      int8 = 5
	sourceGroup        int8 = 8
)

// IsLocalConfigResource reports whether coordinatord answers a config resource itself: every
// GROUP resource, and the BROKER resource named by its node id. The gateway splits requests on
// it.
func IsLocalConfigResource(typ kmsg.ConfigResourceType, name string, nodeID int32) bool {
	switch typ {
	case kmsg.ConfigResourceTypeGroupConfig:
		return true
	case kmsg.ConfigResourceTypeBroker:
		return name == strconv.Itoa(int(nodeID))
	}
	return false
}

// isClusterBrokerDefaults reports the BROKER resource named "", Kafka's cluster-wide dynamic
// broker defaults. Only a standalone node answers it (in gateway mode it goes upstream, as
// IsLocalConfigResource says), as the whole cluster it is.
func isClusterBrokerDefaults(typ kmsg.ConfigResourceType, name string) bool {
	return typ == kmsg.ConfigResourceTypeBroker && name == ""
}

func (t *Table) unsupportedResourceMessage() *string {
	m := "coordinatord serves the configs of GROUP resources and of its own BROKER resource (" +
		strconv.Itoa(int(t.deps.Node.ID)) + ") only"
	return &m
}

func (t *Table) brokerConfig(name string) (BrokerConfig, bool) {
	for _, c := range t.deps.BrokerConfigs {
		if c.Name == name {
			return c, true
		}
	}
	return BrokerConfig{}, false
}

// describeGroupConfigs answers DescribeConfigs for one GROUP resource. The group need not
// exist: Kafka describes the defaults of any id.
func (t *Table) describeGroupConfigs(ctx context.Context, r kmsg.DescribeConfigsRequestResource, synonyms, docs bool) kmsg.DescribeConfigsResponseResource {
	out := kmsg.NewDescribeConfigsResponseResource()
	out.ResourceType, out.ResourceName = r.ResourceType, r.ResourceName
	out.ErrorMessage = kmsg.StringPtr("") // Kafka 4.4 answers an empty message, not null, on success
	if r.ResourceName == "" {
		out.ErrorCode = kerr.InvalidRequest.Code
		msg := "Group name must not be empty"
		out.ErrorMessage = &msg
		return out
	}
	v, err := t.deps.Groups.For(r.ResourceName).Read(ctx, shard.ReadGroupConfigs(r.ResourceName))
	if err != nil {
		out.ErrorCode = availabilityCode(err)
		return out
	}
	set := v.(map[string]string)
	want := map[string]bool{}
	for _, n := range r.ConfigNames {
		want[n] = true
	}
	for _, k := range streams.GroupConfigKeys {
		// Kafka lists an internal key only when it is set on the group (its describe lists the
		// group's originals plus the non-internal values): an operator sees what they set,
		// e.g. streams.migration.policy, and an unset group describes exactly Kafka's keys.
		if _, isSet := set[k.Name]; (k.Internal && !isSet) || (len(r.ConfigNames) > 0 && !want[k.Name]) {
			continue
		}
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name, c.ConfigType = k.Name, kmsg.ConfigType(k.Type)
		var syns []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
		syn := func(name, value string, src int8) {
			s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			s.Name, s.Value, s.Source = name, kmsg.StringPtr(value), kmsg.ConfigSource(src)
			syns = append(syns, s)
		}
		if val, ok := set[k.Name]; ok {
			syn(k.Name, val, sourceGroup)
		}
		b, _ := t.brokerConfig(k.Broker)
		if b.Explicit {
			syn(k.Broker, b.Value, sourceStaticBroker)
		}
		syn(k.Broker, t.groupConfigDefault(k, b), sourceDefault)
		val, src := syns[0].Value, syns[0].Source
		if k.Name == "streams.assignor.name" && src != kmsg.ConfigSource(sourceGroup) {
			val = kmsg.StringPtr(t.deps.Streams.AssignorName()) // the first registered assignor
		}
		c.Value, c.Source = val, src
		if synonyms {
			c.ConfigSynonyms = syns
		}
		if docs {
			c.Documentation = kmsg.StringPtr(k.Doc)
		}
		out.Configs = append(out.Configs, c)
	}
	return out
}

// groupConfigDefault is the broker key's default value, as Kafka lists it as the
// DEFAULT_CONFIG synonym.
func (t *Table) groupConfigDefault(k streams.GroupConfigKey, b BrokerConfig) string {
	if d, ok := t.deps.BrokerDefaults[k.Broker]; ok {
		return d
	}
	return b.Value
}

// describeBrokerConfigs answers DescribeConfigs for this node's BROKER resource: every
// effective key, read-only (coordinatord has no dynamic broker configs).
func (t *Table) describeBrokerConfigs(r kmsg.DescribeConfigsRequestResource, synonyms, docs bool) kmsg.DescribeConfigsResponseResource {
	out := kmsg.NewDescribeConfigsResponseResource()
	out.ResourceType, out.ResourceName = r.ResourceType, r.ResourceName
	out.ErrorMessage = kmsg.StringPtr("")
	want := map[string]bool{}
	for _, n := range r.ConfigNames {
		want[n] = true
	}
	for _, b := range t.deps.BrokerConfigs {
		if len(r.ConfigNames) > 0 && !want[b.Name] {
			continue
		}
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name, c.ReadOnly, c.ConfigType = b.Name, true, kmsg.ConfigTypeString
		c.Value, c.Source = kmsg.StringPtr(b.Value), kmsg.ConfigSource(sourceDefault)
		if b.Explicit {
			c.Source = kmsg.ConfigSource(sourceStaticBroker)
		}
		if sensitiveKey(b.Name) {
			c.Value, c.IsSensitive = nil, true
		}
		if synonyms {
			s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			s.Name, s.Value, s.Source = c.Name, c.Value, c.Source
			c.ConfigSynonyms = append(c.ConfigSynonyms, s)
		}
		if docs && b.Doc != "" {
			c.Documentation = kmsg.StringPtr(b.Doc)
		}
		out.Configs = append(out.Configs, c)
	}
	return out
}

// sensitiveKey: values that may be secrets (plugin pass-through keys) are never shown, as Kafka
// hides PASSWORD keys.
func sensitiveKey(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"password", "secret", "token", "credential", "jaas"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return strings.HasSuffix(n, ".key")
}

// groupConfigOp is one requested change of a GROUP resource.
type groupConfigOp struct {
	name  string
	op    kmsg.IncrementalAlterConfigOp
	value *string
}

// alterGroupConfigs applies ops to a GROUP resource. replace (legacy AlterConfigs) replaces the
// whole set with the SET ops. It returns the error code and message for the resource.
func (t *Table) alterGroupConfigs(ctx context.Context, group string, ops []groupConfigOp, replace, validateOnly bool) (int16, *string) {
	fail := func(code int16, msg string) (int16, *string) { return code, &msg }
	if group == "" {
		return fail(kerr.InvalidRequest.Code, "Default group resources are not allowed.")
	}
	seen := map[string]bool{}
	for _, o := range ops {
		if seen[o.name] {
			return fail(kerr.InvalidRequest.Code, "Error due to duplicate config keys")
		}
		seen[o.name] = true
	}
	for _, o := range ops {
		if o.op == kmsg.IncrementalAlterConfigOpSet && o.value == nil {
			return fail(kerr.InvalidRequest.Code, "Null value not supported for : "+o.name)
		}
		if o.op != kmsg.IncrementalAlterConfigOpSet && o.op != kmsg.IncrementalAlterConfigOpDelete {
			if o.op != kmsg.IncrementalAlterConfigOpAppend && o.op != kmsg.IncrementalAlterConfigOpSubtract {
				return fail(kerr.InvalidRequest.Code, "Unknown alter config operation "+strconv.Itoa(int(o.op))+" for "+o.name)
			}
			return fail(kerr.InvalidConfig.Code, "Can't "+o.op.String()+" to key "+o.name+" because its type is not LIST.")
		}
	}
	cfg := t.deps.Streams
	change := func(cur map[string]string) (map[string]string, error) {
		if replace || cur == nil {
			cur = map[string]string{}
		}
		for _, o := range ops {
			if o.op == kmsg.IncrementalAlterConfigOpDelete {
				delete(cur, o.name)
			} else {
				cur[o.name] = *o.value
			}
		}
		for name, v := range cur {
			k, ok := streams.LookupGroupConfigKey(name)
			if !ok {
				return nil, &streams.GroupConfigError{Msg: unknownGroupConfigMessage(name)}
			}
			n, err := streams.NormalizeGroupConfig(k, v)
			if err != nil {
				return nil, err
			}
			cur[name] = n
		}
		if err := streams.ValidateGroupConfigs(cur, cfg.GroupBounds, cfg.Assignors, cfg); err != nil {
			return nil, err
		}
		if err := consumer.ValidateGroupConfigs(cur, t.deps.Consumer); err != nil {
			return nil, &streams.GroupConfigError{Msg: err.Error()}
		}
		return cur, nil
	}
	v, err := t.deps.Groups.For(group).Write(ctx, shard.AlterGroupConfigs(group, validateOnly, t.deps.Limits.GroupConfigMaxGroups, change))
	if err != nil {
		return availabilityCode(err), nil
	}
	var gce *streams.GroupConfigError
	if e, ok := v.(error); ok && errors.As(e, &gce) {
		return fail(kerr.InvalidConfig.Code, gce.Msg)
	}
	if !validateOnly {
		// An operator's change that alters how a group runs: worth a line in the log.
		names := make([]string, len(ops))
		for i, o := range ops {
			names[i] = o.op.String() + " " + o.name
		}
		t.log.Info("group configs altered", zap.String("group", group), zap.Strings("changes", names), zap.Bool("replace", replace))
	}
	return 0, nil
}

// unknownGroupConfigMessage is Kafka's message, with the reason for the keys Kafka 4.4 knows
// and coordinatord does not (it has no share groups).
func unknownGroupConfigMessage(name string) string {
	msg := "Unknown group config name: " + name
	for _, p := range []string{"consumer.", "share.", "errors.deadletterqueue."} {
		if strings.HasPrefix(name, p) {
			return msg + " (coordinatord serves classic, consumer and streams groups; it accepts the consumer.session.timeout.ms, consumer.heartbeat.interval.ms, consumer.assignment.interval.ms and streams.* group configs)"
		}
	}
	return msg
}
