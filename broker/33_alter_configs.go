package broker

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterConfigs: v0-2
//
// Behavior:
// * Topic resources: the given configs REPLACE all of the topic's
//   overrides (configs not listed return to their defaults), as Kafka's
//   legacy AlterConfigs does. Every value is validated first
//   (INVALID_CONFIG with a message); nothing changes if one is bad.
// * The new overrides are durable (meta.json fsynced) and applied to the
//   partition logs (retention, segment size, max.message.bytes, timestamp
//   type...) before the response.
// * ValidateOnly checks and changes nothing.
// * Broker configs are static: INVALID_REQUEST. Unknown topic:
//   UNKNOWN_TOPIC_OR_PARTITION.
//
// Version notes:
// * v1: ThrottleMillis semantics
// * v2: flexible

func init() { regAPI(api{key: kmsg.AlterConfigs, min: 0, max: 2, handle: handleAlterConfigs}) }

func handleAlterConfigs(b *Broker, _ context.Context, _ *slot, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		err := func() error {
			if err := checkAlterResource(b, rr.ResourceType, rr.ResourceName); err != nil {
				return err
			}
			configs := map[string]string{}
			for _, c := range rr.Configs {
				v, err := validateTopicConfig(c.Name, c.Value)
				if err != nil {
					return kerrMsg(kerr.InvalidConfig, err.Error())
				}
				configs[c.Name] = v
			}
			if req.ValidateOnly {
				return nil
			}
			return b.topics.setConfigs(rr.ResourceName, configs)
		}()
		sr.ErrorCode, sr.ErrorMessage = errorCode(err), errMessage(err)
		b.metrics.partitionError("AlterConfigs", sr.ErrorCode)
		resp.Resources = append(resp.Resources, sr)
	}
	return resp, nil
}

// checkAlterResource accepts existing, non-internal topics only.
func checkAlterResource(b *Broker, typ kmsg.ConfigResourceType, name string) error {
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		t, ok := b.topics.get(name)
		if !ok {
			return kerr.UnknownTopicOrPartition
		}
		if t.internal {
			return kerrMsg(kerr.InvalidRequest, fmt.Sprintf("the configs of internal topic %s cannot be changed", name))
		}
		return nil
	case kmsg.ConfigResourceTypeBroker:
		return kerrMsg(kerr.InvalidRequest, "broker configs are static in weir: set them in the broker's configuration")
	default:
		return kerrMsg(kerr.InvalidRequest, fmt.Sprintf("unsupported resource type %d", typ))
	}
}
