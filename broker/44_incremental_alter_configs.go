package broker

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// IncrementalAlterConfigs: v0-1
//
// Behavior:
// * Topic resources: each op applies to the topic's current overrides:
//   SET (0) sets a value, DELETE (1) returns a config to its default,
//   APPEND (2) / SUBTRACT (3) add or remove items of a list config
//   (cleanup.policy...), INVALID_CONFIG on non-list configs. Values are
//   validated as in CreateTopics; a config named twice is INVALID_REQUEST.
//   Nothing changes if one op is bad.
// * The result is durable and applied to the logs before the response;
//   ValidateOnly changes nothing.
// * Group resources: the share.* group configs of share groups (SET,
//   DELETE), durable before the response.
// * Broker configs are static: INVALID_REQUEST. Unknown topic:
//   UNKNOWN_TOPIC_OR_PARTITION.
//
// Version notes:
// * v1: flexible

func init() {
	regAPI(api{key: kmsg.IncrementalAlterConfigs, min: 0, max: 1, handle: handleIncrementalAlterConfigs})
}

func handleIncrementalAlterConfigs(b *Broker, ctx context.Context, _ *slot, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewIncrementalAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		err := func() error {
			if rr.ResourceType == kmsg.ConfigResourceTypeGroupConfig {
				return b.alterGroupConfigs(ctx, &rr, req.ValidateOnly) // share.* (shares.go)
			}
			if err := checkAlterResource(b, rr.ResourceType, rr.ResourceName); err != nil {
				return err
			}
			t, _ := b.topics.get(rr.ResourceName)
			configs := maps.Clone(t.configs)
			seen := map[string]bool{}
			for _, c := range rr.Configs {
				if seen[c.Name] {
					return kerrMsg(kerr.InvalidRequest, fmt.Sprintf("config %s is altered more than once", c.Name))
				}
				seen[c.Name] = true
				d, known := topicConfigDefs[c.Name]
				if !known {
					return kerrMsg(kerr.InvalidConfig, fmt.Sprintf("unknown topic config name: %s", c.Name))
				}
				switch c.Op {
				case kmsg.IncrementalAlterConfigOpSet:
					v, err := validateTopicConfig(c.Name, c.Value)
					if err != nil {
						return kerrMsg(kerr.InvalidConfig, err.Error())
					}
					configs[c.Name] = v
				case kmsg.IncrementalAlterConfigOpDelete:
					delete(configs, c.Name)
				case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
					if d.typ != ctList {
						return kerrMsg(kerr.InvalidConfig, fmt.Sprintf("config %s is not a list: APPEND/SUBTRACT are not allowed", c.Name))
					}
					cur, _ := configValue(configs, c.Name)
					items := splitList(cur)
					for _, it := range splitList(deref(c.Value)) {
						if c.Op == kmsg.IncrementalAlterConfigOpAppend {
							if !slices.Contains(items, it) {
								items = append(items, it)
							}
						} else {
							items = slices.DeleteFunc(items, func(s string) bool { return s == it })
						}
					}
					joined := strings.Join(items, ",")
					v, err := validateTopicConfig(c.Name, &joined)
					if err != nil {
						return kerrMsg(kerr.InvalidConfig, err.Error())
					}
					configs[c.Name] = v
				default:
					return kerrMsg(kerr.InvalidRequest, fmt.Sprintf("unknown config operation %d", c.Op))
				}
			}
			if req.ValidateOnly {
				return nil
			}
			return b.topics.setConfigs(rr.ResourceName, configs)
		}()
		sr.ErrorCode, sr.ErrorMessage = errorCode(err), errMessage(err)
		b.metrics.partitionError("IncrementalAlterConfigs", sr.ErrorCode)
		resp.Resources = append(resp.Resources, sr)
	}
	return resp, nil
}

func splitList(s string) []string {
	var out []string
	for _, it := range strings.Split(s, ",") {
		if it = strings.TrimSpace(it); it != "" {
			out = append(out, it)
		}
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
