package broker

import (
	"encoding/binary"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/broker/authz"
)

// frameAs is frame with a client id of choice (asPrincipal maps it).
func frameAs(req kmsg.Request, corr int32, clientID string) []byte {
	buf := []byte{0, 0, 0, 0}
	buf = binary.BigEndian.AppendUint16(buf, uint16(req.Key()))
	buf = binary.BigEndian.AppendUint16(buf, uint16(req.GetVersion()))
	buf = binary.BigEndian.AppendUint32(buf, uint32(corr))
	buf = binary.BigEndian.AppendUint16(buf, uint16(len(clientID)))
	buf = append(buf, clientID...)
	if req.IsFlexible() {
		buf = append(buf, 0)
	}
	buf = req.AppendTo(buf)
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
	return buf
}

// errorCodes collects every ErrorCode field of resp, at any depth.
func errorCodes(resp kmsg.Response) []int16 {
	var out []int16
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Struct:
			for i := range v.NumField() {
				f := v.Type().Field(i)
				if f.Name == "ErrorCode" && f.Type.Kind() == reflect.Int16 {
					out = append(out, int16(v.Field(i).Int()))
				} else {
					walk(v.Field(i))
				}
			}
		case reflect.Slice:
			if v.Type().Elem().Kind() == reflect.Uint8 {
				return
			}
			for i := range v.Len() {
				walk(v.Index(i))
			}
		}
	}
	walk(reflect.ValueOf(resp))
	return out
}

var authzCodes = []int16{codeTopic, codeGroup, codeCluster, codeTxnID}

func bind(rt authz.ResourceType, name string, op authz.Operation) authz.Binding {
	return authz.Binding{ResourceType: rt, ResourceName: name, PatternType: authz.PatternLiteral, Host: "*",
		Operation: op, Permission: authz.PermAllow}
}

func onTopic(op authz.Operation) authz.Binding { return bind(authz.ResourceTopic, "t", op) }
func onGroup(op authz.Operation) authz.Binding { return bind(authz.ResourceGroup, "g", op) }
func onTxn(op authz.Operation) authz.Binding   { return bind(authz.ResourceTransactionalID, "tx", op) }
func onCluster(op authz.Operation) authz.Binding {
	return bind(authz.ResourceCluster, authz.ClusterName, op)
}

// matrixCase is one authorization requirement of one API: without grant
// the request is refused with want; with grant it is not refused (no
// authorization error code anywhere in the answer). check, if set,
// replaces the code assertions (filtering APIs).
type matrixCase struct {
	name  string
	req   func() kmsg.Request
	grant []authz.Binding // given to the allowed principal
	part  []authz.Binding // given to the refused principal too (the refusal is about the rest)
	want  int16
	check func(t *testing.T, resp kmsg.Response, allowed bool)
}

func matrixCases() map[kmsg.Key][]matrixCase {
	tp := func(s string) *string { return &s }
	m := map[kmsg.Key][]matrixCase{
		kmsg.Produce: {
			{name: "topic", want: codeTopic, grant: []authz.Binding{onTopic(authz.OpWrite)}, req: func() kmsg.Request {
				r := kmsg.NewPtrProduceRequest()
				r.Version, r.Acks, r.TimeoutMillis = 9, 1, 5000
				t := kmsg.NewProduceRequestTopic()
				t.Topic = "t"
				p := kmsg.NewProduceRequestTopicPartition()
				t.Partitions = append(t.Partitions, p)
				r.Topics = append(r.Topics, t)
				return r
			}},
			{name: "txn", want: codeTxnID, part: []authz.Binding{onTopic(authz.OpWrite)}, grant: []authz.Binding{onTxn(authz.OpWrite)}, req: func() kmsg.Request {
				r := kmsg.NewPtrProduceRequest()
				r.Version, r.Acks, r.TimeoutMillis, r.TransactionID = 9, -1, 5000, tp("tx")
				t := kmsg.NewProduceRequestTopic()
				t.Topic = "t"
				t.Partitions = append(t.Partitions, kmsg.NewProduceRequestTopicPartition())
				r.Topics = append(r.Topics, t)
				return r
			}},
		},
		kmsg.Fetch: {
			{name: "consumer", want: codeTopic, grant: []authz.Binding{onTopic(authz.OpRead)}, req: func() kmsg.Request {
				r := kmsg.NewPtrFetchRequest()
				r.Version, r.MaxWaitMillis, r.MaxBytes, r.ReplicaID = 12, 0, 1<<20, -1
				t := kmsg.NewFetchRequestTopic()
				t.Topic = "t"
				p := kmsg.NewFetchRequestTopicPartition()
				p.PartitionMaxBytes = 1 << 20
				t.Partitions = append(t.Partitions, p)
				r.Topics = append(r.Topics, t)
				return r
			}},
			{name: "follower", want: codeTopic, part: []authz.Binding{onTopic(authz.OpRead)}, grant: []authz.Binding{onCluster(authz.OpClusterAction)}, req: func() kmsg.Request {
				r := kmsg.NewPtrFetchRequest()
				r.Version, r.ReplicaID, r.MaxBytes = 12, 1, 1<<20
				t := kmsg.NewFetchRequestTopic()
				t.Topic = "t"
				p := kmsg.NewFetchRequestTopicPartition()
				p.PartitionMaxBytes = 1 << 20
				t.Partitions = append(t.Partitions, p)
				r.Topics = append(r.Topics, t)
				return r
			}},
		},
		kmsg.ListOffsets: {{name: "topic", want: codeTopic, grant: []authz.Binding{onTopic(authz.OpDescribe)}, req: func() kmsg.Request {
			r := kmsg.NewPtrListOffsetsRequest()
			r.Version = 7
			t := kmsg.NewListOffsetsRequestTopic()
			t.Topic = "t"
			p := kmsg.NewListOffsetsRequestTopicPartition()
			p.Timestamp = -1
			t.Partitions = append(t.Partitions, p)
			r.Topics = append(r.Topics, t)
			return r
		}}},
		kmsg.Metadata: {
			{name: "named", want: codeTopic, grant: []authz.Binding{onTopic(authz.OpDescribe)}, req: func() kmsg.Request {
				r := kmsg.NewPtrMetadataRequest()
				r.Version = 12
				t := kmsg.NewMetadataRequestTopic()
				t.Topic = tp("t")
				r.Topics = append(r.Topics, t)
				return r
			}},
			{name: "all", grant: []authz.Binding{onTopic(authz.OpRead)}, req: func() kmsg.Request {
				r := kmsg.NewPtrMetadataRequest()
				r.Version = 12
				return r
			}, check: metadataLists},
			// v0 has no null list: an empty one asks for every topic.
			{name: "v0 all", grant: []authz.Binding{onTopic(authz.OpDescribe)}, req: func() kmsg.Request {
				r := kmsg.NewPtrMetadataRequest()
				r.Version = 0
				return r
			}, check: metadataLists},
		},
		kmsg.OffsetCommit: {
			{name: "group", want: codeGroup, grant: []authz.Binding{onGroup(authz.OpRead), onTopic(authz.OpRead)}, req: offsetCommit},
			{name: "topic", want: codeTopic, part: []authz.Binding{onGroup(authz.OpRead)}, grant: []authz.Binding{onTopic(authz.OpRead)}, req: offsetCommit},
		},
		kmsg.OffsetFetch: {
			{name: "v7 group", want: codeGroup, grant: []authz.Binding{onGroup(authz.OpDescribe)}, req: func() kmsg.Request {
				r := kmsg.NewPtrOffsetFetchRequest()
				r.Version, r.Group = 7, "g"
				return r
			}},
			{name: "v1 group", want: codeGroup, part: []authz.Binding{onTopic(authz.OpDescribe)}, grant: []authz.Binding{onGroup(authz.OpDescribe)}, req: func() kmsg.Request {
				r := kmsg.NewPtrOffsetFetchRequest()
				r.Version, r.Group = 1, "g"
				rt := kmsg.NewOffsetFetchRequestTopic()
				rt.Topic, rt.Partitions = "t", []int32{0}
				r.Topics = append(r.Topics, rt)
				return r
			}},
			{name: "v8 topic", want: codeTopic, part: []authz.Binding{onGroup(authz.OpDescribe)}, grant: []authz.Binding{onTopic(authz.OpDescribe)}, req: func() kmsg.Request {
				r := kmsg.NewPtrOffsetFetchRequest()
				r.Version = 8
				g := kmsg.NewOffsetFetchRequestGroup()
				g.Group = "g"
				gt := kmsg.NewOffsetFetchRequestGroupTopic()
				gt.Topic, gt.Partitions = "t", []int32{0}
				g.Topics = append(g.Topics, gt)
				r.Groups = append(r.Groups, g)
				return r
			}},
		},
		kmsg.FindCoordinator: {
			{name: "v3 group", want: codeGroup, grant: []authz.Binding{onGroup(authz.OpDescribe)}, req: func() kmsg.Request {
				r := kmsg.NewPtrFindCoordinatorRequest()
				r.Version, r.CoordinatorKey = 3, "g"
				return r
			}},
			{name: "v4 txn", want: codeTxnID, grant: []authz.Binding{onTxn(authz.OpDescribe)}, req: func() kmsg.Request {
				r := kmsg.NewPtrFindCoordinatorRequest()
				r.Version, r.CoordinatorType, r.CoordinatorKeys = 4, 1, []string{"tx"}
				return r
			}},
		},
		kmsg.JoinGroup: {{name: "group", want: codeGroup, grant: []authz.Binding{onGroup(authz.OpRead)}, req: func() kmsg.Request {
			r := kmsg.NewPtrJoinGroupRequest()
			r.Version, r.Group, r.SessionTimeoutMillis, r.RebalanceTimeoutMillis, r.ProtocolType = 5, "g", 10000, 1000, "consumer"
			p := kmsg.NewJoinGroupRequestProtocol()
			p.Name = "range"
			r.Protocols = append(r.Protocols, p)
			return r
		}}},
		kmsg.Heartbeat: {{name: "group", want: codeGroup, grant: []authz.Binding{onGroup(authz.OpRead)}, req: func() kmsg.Request {
			r := kmsg.NewPtrHeartbeatRequest()
			r.Version, r.Group, r.MemberID = 3, "g", "m"
			return r
		}}},
		kmsg.LeaveGroup: {{name: "group", want: codeGroup, grant: []authz.Binding{onGroup(authz.OpRead)}, req: func() kmsg.Request {
			r := kmsg.NewPtrLeaveGroupRequest()
			r.Version, r.Group = 3, "g"
			m := kmsg.NewLeaveGroupRequestMember()
			m.MemberID = "m"
			r.Members = append(r.Members, m)
			return r
		}}},
		kmsg.SyncGroup: {{name: "group", want: codeGroup, grant: []authz.Binding{onGroup(authz.OpRead)}, req: func() kmsg.Request {
			r := kmsg.NewPtrSyncGroupRequest()
			r.Version, r.Group, r.MemberID = 3, "g", "m"
			return r
		}}},
		kmsg.DescribeGroups: {{name: "group", want: codeGroup, grant: []authz.Binding{onGroup(authz.OpDescribe)}, req: func() kmsg.Request {
			r := kmsg.NewPtrDescribeGroupsRequest()
			r.Version, r.Groups = 5, []string{"g"}
			return r
		}}},
		kmsg.ListGroups: {{name: "filter", grant: []authz.Binding{onGroup(authz.OpDescribe)}, req: func() kmsg.Request {
			r := kmsg.NewPtrListGroupsRequest()
			r.Version = 4
			return r
		}, check: func(t *testing.T, resp kmsg.Response, allowed bool) {
			var names []string
			for _, g := range resp.(*kmsg.ListGroupsResponse).Groups {
				names = append(names, g.Group)
			}
			if slices.Contains(names, "g") != allowed {
				t.Fatalf("allowed %v: listed groups %v", allowed, names)
			}
		}}},
		kmsg.CreateTopics: {{name: "topic", want: codeTopic, grant: []authz.Binding{bind(authz.ResourceTopic, "new", authz.OpCreate)}, req: func() kmsg.Request {
			r := kmsg.NewPtrCreateTopicsRequest()
			r.Version, r.TimeoutMillis = 5, 5000
			t := kmsg.NewCreateTopicsRequestTopic()
			t.Topic, t.NumPartitions, t.ReplicationFactor = "new", 1, 1
			r.Topics = append(r.Topics, t)
			return r
		}}},
		kmsg.DeleteTopics: {{name: "topic", want: codeTopic, grant: []authz.Binding{bind(authz.ResourceTopic, "del", authz.OpDelete)}, req: func() kmsg.Request {
			r := kmsg.NewPtrDeleteTopicsRequest()
			r.Version, r.TimeoutMillis, r.TopicNames = 5, 5000, []string{"del"}
			return r
		}}},
		kmsg.DeleteRecords: {{name: "topic", want: codeTopic, grant: []authz.Binding{onTopic(authz.OpDelete)}, req: func() kmsg.Request {
			r := kmsg.NewPtrDeleteRecordsRequest()
			r.Version, r.TimeoutMillis = 1, 5000
			t := kmsg.NewDeleteRecordsRequestTopic()
			t.Topic = "t"
			p := kmsg.NewDeleteRecordsRequestTopicPartition()
			p.Offset = 0
			t.Partitions = append(t.Partitions, p)
			r.Topics = append(r.Topics, t)
			return r
		}}},
		kmsg.InitProducerID: {
			{name: "idempotent", want: codeCluster, grant: []authz.Binding{onCluster(authz.OpIdempotentWrite)}, req: func() kmsg.Request {
				r := kmsg.NewPtrInitProducerIDRequest()
				r.Version, r.ProducerID, r.ProducerEpoch = 4, -1, -1
				return r
			}},
			{name: "idempotent by topic write", want: codeCluster, grant: []authz.Binding{onTopic(authz.OpWrite)}, req: func() kmsg.Request {
				r := kmsg.NewPtrInitProducerIDRequest()
				r.Version, r.ProducerID, r.ProducerEpoch = 4, -1, -1
				return r
			}},
			{name: "txn", want: codeTxnID, grant: []authz.Binding{onTxn(authz.OpWrite)}, req: func() kmsg.Request {
				r := kmsg.NewPtrInitProducerIDRequest()
				r.Version, r.ProducerID, r.ProducerEpoch, r.TransactionalID, r.TransactionTimeoutMillis = 4, -1, -1, tp("tx"), 10000
				return r
			}},
		},
		kmsg.OffsetForLeaderEpoch: {
			{name: "cluster action", want: codeTopic, grant: []authz.Binding{onCluster(authz.OpClusterAction)}, req: ofleReq},
			{name: "topic", want: codeTopic, grant: []authz.Binding{onTopic(authz.OpDescribe)}, req: func() kmsg.Request {
				r := kmsg.NewPtrOffsetForLeaderEpochRequest()
				r.Version, r.ReplicaID = 4, -1
				t := kmsg.NewOffsetForLeaderEpochRequestTopic()
				t.Topic = "t"
				p := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
				p.CurrentLeaderEpoch, p.LeaderEpoch = -1, 0
				t.Partitions = append(t.Partitions, p)
				r.Topics = append(r.Topics, t)
				return r
			}},
		},
		kmsg.AddPartitionsToTxn: {
			{name: "v3 txn", want: codeTxnID, part: []authz.Binding{onTopic(authz.OpWrite)}, grant: []authz.Binding{onTxn(authz.OpWrite)}, req: addPartitions},
			{name: "v3 topic", want: codeTopic, part: []authz.Binding{onTxn(authz.OpWrite)}, grant: []authz.Binding{onTopic(authz.OpWrite)}, req: addPartitions},
			{name: "v4 broker", want: codeCluster, grant: []authz.Binding{onCluster(authz.OpClusterAction)}, req: func() kmsg.Request {
				r := kmsg.NewPtrAddPartitionsToTxnRequest()
				r.Version = 4
				tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
				tx.TransactionalID, tx.ProducerID, tx.VerifyOnly = "tx", 1, true
				r.Transactions = append(r.Transactions, tx)
				return r
			}},
		},
		kmsg.AddOffsetsToTxn: {
			{name: "txn", want: codeTxnID, part: []authz.Binding{onGroup(authz.OpRead)}, grant: []authz.Binding{onTxn(authz.OpWrite)}, req: addOffsets},
			{name: "group", want: codeGroup, part: []authz.Binding{onTxn(authz.OpWrite)}, grant: []authz.Binding{onGroup(authz.OpRead)}, req: addOffsets},
		},
		kmsg.EndTxn: {{name: "txn", want: codeTxnID, grant: []authz.Binding{onTxn(authz.OpWrite)}, req: func() kmsg.Request {
			r := kmsg.NewPtrEndTxnRequest()
			r.Version, r.TransactionalID, r.ProducerID = 3, "tx", 1
			return r
		}}},
		kmsg.WriteTxnMarkers: {{name: "cluster", want: codeCluster, grant: []authz.Binding{onCluster(authz.OpClusterAction)}, req: func() kmsg.Request {
			r := kmsg.NewPtrWriteTxnMarkersRequest()
			r.Version = 1
			m := kmsg.NewWriteTxnMarkersRequestMarker()
			m.ProducerID = 1
			mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			mt.Topic, mt.Partitions = "t", []int32{0}
			m.Topics = append(m.Topics, mt)
			r.Markers = append(r.Markers, m)
			return r
		}}},
		kmsg.TxnOffsetCommit: {
			{name: "txn", want: codeTxnID, part: []authz.Binding{onGroup(authz.OpRead), onTopic(authz.OpRead)}, grant: []authz.Binding{onTxn(authz.OpWrite)}, req: txnOffsetCommit},
			{name: "group", want: codeGroup, part: []authz.Binding{onTxn(authz.OpWrite), onTopic(authz.OpRead)}, grant: []authz.Binding{onGroup(authz.OpRead)}, req: txnOffsetCommit},
			{name: "topic", want: codeTopic, part: []authz.Binding{onTxn(authz.OpWrite), onGroup(authz.OpRead)}, grant: []authz.Binding{onTopic(authz.OpRead)}, req: txnOffsetCommit},
		},
		kmsg.DescribeACLs: {{name: "cluster", want: codeCluster, grant: []authz.Binding{onCluster(authz.OpDescribe)}, req: func() kmsg.Request {
			r := kmsg.NewPtrDescribeACLsRequest()
			r.Version, r.ResourceType, r.ResourcePatternType, r.Operation, r.PermissionType = 2, 1, 1, 1, 1
			return r
		}}},
		kmsg.CreateACLs: {{name: "cluster", want: codeCluster, grant: []authz.Binding{onCluster(authz.OpAlter)}, req: func() kmsg.Request {
			r := kmsg.NewPtrCreateACLsRequest()
			r.Version = 2
			c := kmsg.NewCreateACLsRequestCreation()
			c.ResourceType, c.ResourceName, c.ResourcePatternType = 2, "zz", 3
			c.Principal, c.Host, c.Operation, c.PermissionType = "User:zz", "*", 3, 3
			r.Creations = append(r.Creations, c)
			return r
		}}},
		kmsg.DeleteACLs: {{name: "cluster", want: codeCluster, grant: []authz.Binding{onCluster(authz.OpAlter)}, req: func() kmsg.Request {
			r := kmsg.NewPtrDeleteACLsRequest()
			r.Version = 2
			f := kmsg.NewDeleteACLsRequestFilter()
			f.ResourceType, f.ResourceName, f.ResourcePatternType, f.Operation, f.PermissionType = 2, tp("zz"), 3, 1, 1
			r.Filters = append(r.Filters, f)
			return r
		}}},
		kmsg.DescribeConfigs: {
			{name: "topic", want: codeTopic, grant: []authz.Binding{onTopic(authz.OpDescribeConfigs)}, req: configsReq(kmsg.DescribeConfigs, kmsg.ConfigResourceTypeTopic, "t")},
			{name: "broker", want: codeCluster, grant: []authz.Binding{onCluster(authz.OpAlterConfigs)}, req: configsReq(kmsg.DescribeConfigs, kmsg.ConfigResourceTypeBroker, "0")},
		},
		kmsg.AlterConfigs: {
			{name: "topic", want: codeTopic, grant: []authz.Binding{onTopic(authz.OpAlterConfigs)}, req: configsReq(kmsg.AlterConfigs, kmsg.ConfigResourceTypeTopic, "t")},
			{name: "broker", want: codeCluster, grant: []authz.Binding{onCluster(authz.OpAlterConfigs)}, req: configsReq(kmsg.AlterConfigs, kmsg.ConfigResourceTypeBroker, "0")},
		},
		kmsg.IncrementalAlterConfigs: {
			{name: "topic", want: codeTopic, grant: []authz.Binding{onTopic(authz.OpAlterConfigs)}, req: configsReq(kmsg.IncrementalAlterConfigs, kmsg.ConfigResourceTypeTopic, "t")},
			{name: "broker", want: codeCluster, grant: []authz.Binding{onCluster(authz.OpAlterConfigs)}, req: configsReq(kmsg.IncrementalAlterConfigs, kmsg.ConfigResourceTypeBroker, "0")},
		},
		kmsg.DescribeLogDirs: {{name: "cluster", want: codeCluster, grant: []authz.Binding{onCluster(authz.OpDescribe)}, req: func() kmsg.Request {
			r := kmsg.NewPtrDescribeLogDirsRequest()
			r.Version = 4
			return r
		}}},
		kmsg.CreatePartitions: {{name: "topic", want: codeTopic, grant: []authz.Binding{onTopic(authz.OpAlter)}, req: func() kmsg.Request {
			r := kmsg.NewPtrCreatePartitionsRequest()
			r.Version, r.TimeoutMillis = 2, 5000
			t := kmsg.NewCreatePartitionsRequestTopic()
			t.Topic, t.Count = "t", 2
			r.Topics = append(r.Topics, t)
			return r
		}}},
		kmsg.DeleteGroups: {{name: "group", want: codeGroup, grant: []authz.Binding{bind(authz.ResourceGroup, "gone", authz.OpDelete)}, req: func() kmsg.Request {
			r := kmsg.NewPtrDeleteGroupsRequest()
			r.Version, r.Groups = 2, []string{"gone"}
			return r
		}}},
		kmsg.OffsetDelete: {
			{name: "group", want: codeGroup, part: []authz.Binding{onTopic(authz.OpRead)}, grant: []authz.Binding{onGroup(authz.OpDelete)}, req: offsetDelete},
			{name: "topic", want: codeTopic, part: []authz.Binding{onGroup(authz.OpDelete)}, grant: []authz.Binding{onTopic(authz.OpRead)}, req: offsetDelete},
		},
		kmsg.DescribeCluster: {{name: "operations", grant: []authz.Binding{onCluster(authz.OpDescribe)}, req: func() kmsg.Request {
			r := kmsg.NewPtrDescribeClusterRequest()
			r.Version, r.IncludeClusterAuthorizedOperations = 1, true
			return r
		}, check: func(t *testing.T, resp kmsg.Response, allowed bool) {
			// Anyone may describe the cluster; the operations need DESCRIBE.
			r := resp.(*kmsg.DescribeClusterResponse)
			if r.ErrorCode != 0 || len(r.Brokers) != 1 || (r.ClusterAuthorizedOperations != 0) != allowed {
				t.Fatalf("allowed %v: error %d, %d brokers, operations %b", allowed, r.ErrorCode, len(r.Brokers), r.ClusterAuthorizedOperations)
			}
		}}},
		kmsg.DescribeProducers: {{name: "topic", want: codeTopic, grant: []authz.Binding{onTopic(authz.OpRead)}, req: func() kmsg.Request {
			r := kmsg.NewPtrDescribeProducersRequest()
			t := kmsg.NewDescribeProducersRequestTopic()
			t.Topic, t.Partitions = "t", []int32{0}
			r.Topics = append(r.Topics, t)
			return r
		}}},
		kmsg.DescribeTransactions: {{name: "txn", want: codeTxnID, grant: []authz.Binding{onTxn(authz.OpDescribe)}, req: func() kmsg.Request {
			r := kmsg.NewPtrDescribeTransactionsRequest()
			r.TransactionalIDs = []string{"tx"}
			return r
		}}},
		kmsg.ListTransactions: {{name: "filter", grant: []authz.Binding{onTxn(authz.OpDescribe)}, req: func() kmsg.Request {
			r := kmsg.NewPtrListTransactionsRequest()
			return r
		}, check: func(t *testing.T, resp kmsg.Response, allowed bool) {
			var ids []string
			for _, s := range resp.(*kmsg.ListTransactionsResponse).TransactionStates {
				ids = append(ids, s.TransactionalID)
			}
			if slices.Contains(ids, "tx") != allowed {
				t.Fatalf("allowed %v: listed %v", allowed, ids)
			}
		}}},
		kmsg.ConsumerGroupHeartbeat: {
			{name: "group", want: codeGroup, part: []authz.Binding{onTopic(authz.OpDescribe)}, grant: []authz.Binding{bind(authz.ResourceGroup, "g2", authz.OpRead)}, req: cgHeartbeat},
			{name: "topic", want: codeTopic, part: []authz.Binding{bind(authz.ResourceGroup, "g2", authz.OpRead)}, grant: []authz.Binding{onTopic(authz.OpDescribe)}, req: cgHeartbeat},
		},
		kmsg.ConsumerGroupDescribe: {{name: "group", want: codeGroup, grant: []authz.Binding{onGroup(authz.OpDescribe)}, req: func() kmsg.Request {
			r := kmsg.NewPtrConsumerGroupDescribeRequest()
			r.Groups = []string{"g"}
			return r
		}}},
		kmsg.DescribeClientQuotas: {{name: "cluster", want: codeCluster, grant: []authz.Binding{onCluster(authz.OpDescribeConfigs)}, req: func() kmsg.Request {
			return kmsg.NewPtrDescribeClientQuotasRequest()
		}}},
		kmsg.AlterClientQuotas: {{name: "cluster", want: codeCluster, grant: []authz.Binding{onCluster(authz.OpAlterConfigs)}, req: func() kmsg.Request {
			r := kmsg.NewPtrAlterClientQuotasRequest()
			e := kmsg.NewAlterClientQuotasRequestEntry()
			c := kmsg.NewAlterClientQuotasRequestEntryEntity()
			c.Type, c.Name = "user", tp("zz")
			e.Entity = append(e.Entity, c)
			o := kmsg.NewAlterClientQuotasRequestEntryOp()
			o.Key, o.Value = "producer_byte_rate", 1000
			e.Ops = append(e.Ops, o)
			r.Entries = append(r.Entries, e)
			return r
		}}},
		kmsg.DescribeUserSCRAMCredentials: {{name: "cluster", want: codeCluster, grant: []authz.Binding{onCluster(authz.OpDescribe)}, req: func() kmsg.Request {
			return kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
		}}},
		kmsg.AlterUserSCRAMCredentials: {{name: "cluster", want: codeCluster, grant: []authz.Binding{onCluster(authz.OpAlter)}, req: func() kmsg.Request {
			r := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
			d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
			d.Name, d.Mechanism = "zz", 1
			r.Deletions = append(r.Deletions, d)
			return r
		}}},
	}
	for k, v := range shareMatrixCases() {
		m[k] = v
	}
	return m
}

func metadataLists(t *testing.T, resp kmsg.Response, allowed bool) {
	var names []string
	for _, tt := range resp.(*kmsg.MetadataResponse).Topics {
		names = append(names, *tt.Topic)
	}
	if slices.Contains(names, "t") != allowed {
		t.Fatalf("allowed %v: listed topics %v", allowed, names)
	}
}

func ofleReq() kmsg.Request {
	r := kmsg.NewPtrOffsetForLeaderEpochRequest()
	r.Version, r.ReplicaID = 4, 1
	t := kmsg.NewOffsetForLeaderEpochRequestTopic()
	t.Topic = "t"
	p := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	p.CurrentLeaderEpoch, p.LeaderEpoch = -1, 0
	t.Partitions = append(t.Partitions, p)
	r.Topics = append(r.Topics, t)
	return r
}

func offsetCommit() kmsg.Request {
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version, r.Group, r.Generation = 8, "g", -1
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic = "t"
	p := kmsg.NewOffsetCommitRequestTopicPartition()
	p.Offset = 0
	t.Partitions = append(t.Partitions, p)
	r.Topics = append(r.Topics, t)
	return r
}

func addPartitions() kmsg.Request {
	r := kmsg.NewPtrAddPartitionsToTxnRequest()
	r.Version, r.TransactionalID, r.ProducerID = 3, "tx", 1
	t := kmsg.NewAddPartitionsToTxnRequestTopic()
	t.Topic, t.Partitions = "t", []int32{0}
	r.Topics = append(r.Topics, t)
	return r
}

func addOffsets() kmsg.Request {
	r := kmsg.NewPtrAddOffsetsToTxnRequest()
	r.Version, r.TransactionalID, r.ProducerID, r.Group = 3, "tx", 1, "g"
	return r
}

func txnOffsetCommit() kmsg.Request {
	r := kmsg.NewPtrTxnOffsetCommitRequest()
	r.Version, r.TransactionalID, r.Group, r.ProducerID, r.Generation = 3, "tx", "g", 1, -1
	t := kmsg.NewTxnOffsetCommitRequestTopic()
	t.Topic = "t"
	t.Partitions = append(t.Partitions, kmsg.NewTxnOffsetCommitRequestTopicPartition())
	r.Topics = append(r.Topics, t)
	return r
}

func offsetDelete() kmsg.Request {
	r := kmsg.NewPtrOffsetDeleteRequest()
	r.Group = "g"
	t := kmsg.NewOffsetDeleteRequestTopic()
	t.Topic = "t"
	t.Partitions = append(t.Partitions, kmsg.NewOffsetDeleteRequestTopicPartition())
	r.Topics = append(r.Topics, t)
	return r
}

func cgHeartbeat() kmsg.Request {
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Group, r.MemberID, r.MemberEpoch, r.RebalanceTimeoutMillis = "g2", "", 0, 5000
	r.SubscribedTopicNames = []string{"t"}
	r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	return r
}

func configsReq(key kmsg.Key, rt kmsg.ConfigResourceType, name string) func() kmsg.Request {
	return func() kmsg.Request {
		switch key {
		case kmsg.DescribeConfigs:
			r := kmsg.NewPtrDescribeConfigsRequest()
			r.Version = 3
			res := kmsg.NewDescribeConfigsRequestResource()
			res.ResourceType, res.ResourceName = rt, name
			r.Resources = append(r.Resources, res)
			return r
		case kmsg.AlterConfigs:
			r := kmsg.NewPtrAlterConfigsRequest()
			r.Version = 1
			res := kmsg.NewAlterConfigsRequestResource()
			res.ResourceType, res.ResourceName = rt, name
			r.Resources = append(r.Resources, res)
			return r
		}
		r := kmsg.NewPtrIncrementalAlterConfigsRequest()
		r.Version = 1
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = rt, name
		r.Resources = append(r.Resources, res)
		return r
	}
}

// TestAuthzMatrix: for every API key, a principal without the ACL the API
// needs is refused with Kafka's error code, and one with it is not.
func TestAuthzMatrix(t *testing.T) {
	b, _ := aclBroker(t)
	ctx := testCtx(t)
	adm := kadm.NewClient(clientAs(t, b, "admin"))
	for _, name := range []string{"t", "del"} {
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, name); err != nil {
			t.Fatal(err)
		}
	}
	if tt, ok := b.topics.get("t"); ok {
		matrixTopicID = tt.id // share requests name topics by ID
	}
	// Objects the allowed requests find: a group with a committed
	// offset ("g"), one to delete ("gone"), a transactional id ("tx"),
	// a topic to delete ("del").
	admin := dialRaw(t, b)
	corr := int32(1)
	adminDo := func(req kmsg.Request) kmsg.Response {
		admin.write(frameAs(req, corr, "as:admin"))
		resp := admin.readResp(req, corr)
		corr++
		return resp
	}
	for _, g := range []string{"g", "gone"} {
		r := offsetCommit().(*kmsg.OffsetCommitRequest)
		r.Group = g
		if codes := errorCodes(adminDo(r)); slices.ContainsFunc(codes, func(c int16) bool { return c != 0 }) {
			t.Fatalf("admin commit to %s: %v", g, codes)
		}
	}
	ipid := kmsg.NewPtrInitProducerIDRequest()
	ipid.Version, ipid.TransactionalID, ipid.TransactionTimeoutMillis, ipid.ProducerID, ipid.ProducerEpoch = 4, kmsg.StringPtr("tx"), 10000, -1, -1
	if c := adminDo(ipid).(*kmsg.InitProducerIDResponse).ErrorCode; c != 0 {
		t.Fatalf("admin InitProducerId: %d", c)
	}

	cases := matrixCases()
	for _, a := range apiByKey {
		if a == nil || authzRules[a.key].check == nil {
			continue
		}
		if len(cases[a.key]) == 0 {
			t.Errorf("%s: no matrix case", a.name)
		}
	}
	n := 0
	for _, a := range apiByKey {
		if a == nil {
			continue
		}
		for _, c := range cases[a.key] {
			n++
			t.Run(a.name+"/"+c.name, func(t *testing.T) {
				refused, allowed := fmt.Sprintf("no%d", n), fmt.Sprintf("ok%d", n)
				var give []authz.Binding
				for _, g := range c.part {
					g.Principal = "User:" + refused
					give = append(give, g)
					g.Principal = "User:" + allowed
					give = append(give, g)
				}
				for _, g := range c.grant {
					g.Principal = "User:" + allowed
					give = append(give, g)
				}
				errs, err := b.authz.Create(give)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range errs {
					if e != nil {
						t.Fatal(e)
					}
				}
				conn := dialRaw(t, b)
				do := func(who string) kmsg.Response {
					req := c.req()
					if req.GetVersion() < a.min || req.GetVersion() > a.max {
						t.Fatalf("case uses %s v%d, served v%d-%d", a.name, req.GetVersion(), a.min, a.max)
					}
					conn.write(frameAs(req, 7, "as:"+who))
					return conn.readResp(req, 7)
				}
				r1, r2 := do(refused), do(allowed)
				if c.check != nil {
					c.check(t, r1, false)
					c.check(t, r2, true)
					return
				}
				if codes := errorCodes(r1); !slices.Contains(codes, c.want) {
					t.Errorf("refused principal: codes %v, want %d among them", codes, c.want)
				}
				if codes := errorCodes(r2); slices.ContainsFunc(codes, func(c int16) bool { return slices.Contains(authzCodes, c) }) {
					t.Errorf("allowed principal: authorization error in codes %v", codes)
				}
			})
		}
	}
}
