package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/broker/authz"
)

// matrixTopicID is the ID of the matrix's topic "t", set by TestAuthzMatrix
// once it exists (share requests name topics by ID).
var matrixTopicID [16]byte

func onShareGroup(op authz.Operation) authz.Binding { return bind(authz.ResourceGroup, "sg", op) }

// shareMatrixCases: the share group APIs (KIP-932) in TestAuthzMatrix.
func shareMatrixCases() map[kmsg.Key][]matrixCase {
	heartbeat := func() kmsg.Request {
		r := kmsg.NewPtrShareGroupHeartbeatRequest()
		r.Version, r.GroupID, r.MemberID, r.MemberEpoch = 1, "sg", "AAAAAAAAAAAAAAAAAAAAAA", 0
		r.SubscribedTopicNames = []string{"t"}
		return r
	}
	fetch := func() kmsg.Request {
		r := kmsg.NewPtrShareFetchRequest()
		r.Version, r.GroupID, r.MemberID = 1, kmsg.StringPtr("sg"), kmsg.StringPtr("AAAAAAAAAAAAAAAAAAAAAA")
		r.MaxBytes, r.MaxRecords, r.BatchSize = 1<<20, 10, 10
		t := kmsg.NewShareFetchRequestTopic()
		t.TopicID = matrixTopicID
		p := kmsg.NewShareFetchRequestTopicPartition()
		t.Partitions = append(t.Partitions, p)
		r.Topics = append(r.Topics, t)
		return r
	}
	ack := func() kmsg.Request {
		r := kmsg.NewPtrShareAcknowledgeRequest()
		r.Version, r.GroupID, r.MemberID, r.ShareSessionEpoch = 1, kmsg.StringPtr("sg"), kmsg.StringPtr("AAAAAAAAAAAAAAAAAAAAAA"), 1
		t := kmsg.NewShareAcknowledgeRequestTopic()
		t.TopicID = matrixTopicID
		t.Partitions = append(t.Partitions, kmsg.NewShareAcknowledgeRequestTopicPartition())
		r.Topics = append(r.Topics, t)
		return r
	}
	describeOffsets := func() kmsg.Request {
		r := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		g := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
		g.GroupID = "sg"
		gt := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
		gt.Topic, gt.Partitions = "t", []int32{0}
		g.Topics = append(g.Topics, gt)
		r.Groups = append(r.Groups, g)
		return r
	}
	alterOffsets := func() kmsg.Request {
		r := kmsg.NewPtrAlterShareGroupOffsetsRequest()
		r.GroupID = "sg"
		t := kmsg.NewAlterShareGroupOffsetsRequestTopic()
		t.Topic = "t"
		t.Partitions = append(t.Partitions, kmsg.NewAlterShareGroupOffsetsRequestTopicPartition())
		r.Topics = append(r.Topics, t)
		return r
	}
	deleteOffsets := func() kmsg.Request {
		r := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
		r.GroupID = "sg"
		t := kmsg.NewDeleteShareGroupOffsetsRequestTopic()
		t.Topic = "t"
		r.Topics = append(r.Topics, t)
		return r
	}
	return map[kmsg.Key][]matrixCase{
		kmsg.ShareGroupHeartbeat: {
			{name: "group", want: codeGroup, part: []authz.Binding{onTopic(authz.OpDescribe)}, grant: []authz.Binding{onShareGroup(authz.OpRead)}, req: heartbeat},
			{name: "topic", want: codeTopic, part: []authz.Binding{onShareGroup(authz.OpRead)}, grant: []authz.Binding{onTopic(authz.OpDescribe)}, req: heartbeat},
		},
		kmsg.ShareGroupDescribe: {{name: "group", want: codeGroup, grant: []authz.Binding{onShareGroup(authz.OpDescribe)}, req: func() kmsg.Request {
			r := kmsg.NewPtrShareGroupDescribeRequest()
			r.Version, r.GroupIDs = 1, []string{"sg"}
			return r
		}}},
		kmsg.ShareFetch: {
			{name: "group", want: codeGroup, part: []authz.Binding{onTopic(authz.OpRead)}, grant: []authz.Binding{onShareGroup(authz.OpRead)}, req: fetch},
			{name: "topic", want: codeTopic, part: []authz.Binding{onShareGroup(authz.OpRead)}, grant: []authz.Binding{onTopic(authz.OpRead)}, req: fetch},
		},
		kmsg.ShareAcknowledge: {
			{name: "group", want: codeGroup, part: []authz.Binding{onTopic(authz.OpRead)}, grant: []authz.Binding{onShareGroup(authz.OpRead)}, req: ack},
			{name: "topic", want: codeTopic, part: []authz.Binding{onShareGroup(authz.OpRead)}, grant: []authz.Binding{onTopic(authz.OpRead)}, req: ack},
		},
		kmsg.DescribeShareGroupOffsets: {
			{name: "group", want: codeGroup, part: []authz.Binding{onTopic(authz.OpDescribe)}, grant: []authz.Binding{onShareGroup(authz.OpDescribe)}, req: describeOffsets},
			{name: "topic", want: codeTopic, part: []authz.Binding{onShareGroup(authz.OpDescribe)}, grant: []authz.Binding{onTopic(authz.OpDescribe)}, req: describeOffsets},
		},
		kmsg.AlterShareGroupOffsets: {
			{name: "group", want: codeGroup, part: []authz.Binding{onTopic(authz.OpRead)}, grant: []authz.Binding{onShareGroup(authz.OpRead)}, req: alterOffsets},
			{name: "topic", want: codeTopic, part: []authz.Binding{onShareGroup(authz.OpRead)}, grant: []authz.Binding{onTopic(authz.OpRead)}, req: alterOffsets},
		},
		kmsg.DeleteShareGroupOffsets: {
			{name: "group", want: codeGroup, part: []authz.Binding{onTopic(authz.OpRead)}, grant: []authz.Binding{onShareGroup(authz.OpDelete)}, req: deleteOffsets},
			{name: "topic", want: codeTopic, part: []authz.Binding{onShareGroup(authz.OpDelete)}, grant: []authz.Binding{onTopic(authz.OpRead)}, req: deleteOffsets},
		},
	}
}
