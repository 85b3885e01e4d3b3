package broker

import (
	"context"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeConfigs: v0-4
//
// Behavior:
// * Topic resources: every topic config weir knows (see topicconfig.go)
//   with its effective value. An override set by CreateTopics/AlterConfigs
//   has source DYNAMIC_TOPIC_CONFIG; otherwise the Kafka default with
//   source DEFAULT_CONFIG. With IncludeSynonyms (v1+) an override lists
//   itself then the broker-level default (e.g. log.retention.ms), a default
//   lists the broker-level default only, as Kafka does. ConfigNames
//   restricts the list; unknown names are omitted. With
//   IncludeDocumentation (v3+) every config says what it does; one weir
//   accepts and stores without acting on it says "NOT ENFORCED by weir"
//   and why (notEnforced in topicconfig.go).
// * Broker resources (name "" or this node's ID): the broker configs
//   weir has, read-only; those set by Config are STATIC_BROKER_CONFIG.
//   Another node ID is INVALID_REQUEST.
// * Unknown topic: UNKNOWN_TOPIC_OR_PARTITION; other resource types (broker
//   loggers, client metrics, groups): INVALID_REQUEST.
//
// Version notes:
// * v1: IncludeSynonyms, Source replaces IsDefault
// * v3: ConfigType, IncludeDocumentation
// * v4: flexible

func init() { regAPI(api{key: kmsg.DescribeConfigs, min: 0, max: 4, handle: handleDescribeConfigs}) }

func handleDescribeConfigs(b *Broker, _ context.Context, _ *slot, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewDescribeConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			t, ok := b.topics.get(rr.ResourceName)
			if !ok {
				sr.ErrorCode = kerr.UnknownTopicOrPartition.Code
				break
			}
			sr.Configs = describeTopicConfigs(t.configs, rr.ConfigNames, req.IncludeSynonyms, req.IncludeDocumentation)
		case kmsg.ConfigResourceTypeGroupConfig:
			sr.Configs = b.describeGroupConfigs(rr.ResourceName, rr.ConfigNames, req.IncludeDocumentation) // shares.go
		case kmsg.ConfigResourceTypeBroker:
			if rr.ResourceName != "" && rr.ResourceName != strconv.Itoa(int(b.cfg.NodeID)) {
				err := kerrMsg(kerr.InvalidRequest, fmt.Sprintf("unexpected broker id, expected %d but received %s", b.cfg.NodeID, rr.ResourceName))
				sr.ErrorCode, sr.ErrorMessage = errorCode(err), errMessage(err)
				break
			}
			sr.Configs = b.describeBrokerConfigs(rr.ConfigNames, req.IncludeSynonyms, req.IncludeDocumentation)
		default:
			err := kerrMsg(kerr.InvalidRequest, fmt.Sprintf("unsupported resource type %d", rr.ResourceType))
			sr.ErrorCode, sr.ErrorMessage = errorCode(err), errMessage(err)
		}
		if req.Version == 0 {
			for i := range sr.Configs {
				sr.Configs[i].IsDefault = sr.Configs[i].Source == kmsg.ConfigSourceDefaultConfig
			}
		}
		b.metrics.partitionError("DescribeConfigs", sr.ErrorCode)
		resp.Resources = append(resp.Resources, sr)
	}
	return resp, nil
}

// describeBrokerConfigs lists the broker configs: the topic defaults under
// their broker names, and the broker's own settings.
func (b *Broker) describeBrokerConfigs(names []string, synonyms, docs bool) []kmsg.DescribeConfigsResponseResourceConfig {
	type bc struct {
		name, value string
		typ         configType
		static      bool
		doc         string
	}
	list := []bc{
		{"broker.id", strconv.Itoa(int(b.cfg.NodeID)), ctInt, true, "this node's ID"},
		{"node.id", strconv.Itoa(int(b.cfg.NodeID)), ctInt, true, "this node's ID"},
		{"num.partitions", strconv.Itoa(int(b.cfg.DefaultPartitions)), ctInt, true, "partitions of auto-created topics"},
		{"auto.create.topics.enable", strconv.FormatBool(b.cfg.AutoCreateTopics), ctBool, true, "create unknown topics on Metadata"},
		{"socket.request.max.bytes", strconv.Itoa(int(b.cfg.MaxRequestBytes)), ctInt, true, "largest request frame accepted"},
		{"log.dirs", b.cfg.DataDir, ctString, true, "the data directory"},
		{"default.replication.factor", "1", ctInt, false, "single node"},
		{"offsets.topic.replication.factor", "1", ctInt, false, "single node"},
		{"offsets.topic.num.partitions", "1", ctInt, false, "__consumer_offsets has one partition"},
		{"transaction.state.log.replication.factor", "1", ctInt, false, "single node"},
		{"delete.topic.enable", "true", ctBool, false, ""},
	}
	for _, n := range sortedTopicConfigNames {
		d := topicConfigDefs[n]
		if d.synonym != "" && d.synonym != n {
			list = append(list, bc{d.synonym, d.def, d.typ, false, d.documentation()})
		} else if d.synonym == n {
			list = append(list, bc{n, d.def, d.typ, false, d.documentation()})
		}
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	seen := map[string]bool{}
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, c := range list {
		if seen[c.name] || (names != nil && !want[c.name]) {
			continue
		}
		seen[c.name] = true
		rc := kmsg.NewDescribeConfigsResponseResourceConfig()
		rc.Name, rc.Value, rc.ReadOnly, rc.ConfigType = c.name, kmsg.StringPtr(c.value), true, kmsg.ConfigType(c.typ)
		rc.Source = kmsg.ConfigSourceDefaultConfig
		if c.static {
			rc.Source = kmsg.ConfigSourceStaticBrokerConfig
		}
		if docs && c.doc != "" {
			rc.Documentation = kmsg.StringPtr(c.doc)
		}
		if synonyms {
			s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			s.Name, s.Value, s.Source = c.name, kmsg.StringPtr(c.value), rc.Source
			rc.ConfigSynonyms = append(rc.ConfigSynonyms, s)
		}
		out = append(out, rc)
	}
	return out
}
