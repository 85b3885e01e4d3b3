package compat

import (
	"errors"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/weirtest"
)

// sarama's ClusterAdmin manages ACLs at three protocol levels (CreateAcls,
// DescribeAcls and DeleteAcls v0 without pattern types, v1, v2 flexible),
// a sarama producer is refused on the denied topic, and at 3.6 its
// client-quota admin calls round-trip.
func TestSaramaACLsAndQuotas(t *testing.T) {
	for _, v := range []sarama.KafkaVersion{sarama.V1_0_0_0, sarama.V2_0_0_0, sarama.V3_6_0_0} {
		t.Run(v.String(), func(t *testing.T) { testSaramaSecurity(t, v) })
	}
}

func testSaramaSecurity(t *testing.T, version sarama.KafkaVersion) {
	b := weirtest.Start(t, weirtest.BrokerConfig(func(c *broker.Config) {
		c.Authorizer = "acl"
		c.AllowEveryoneIfNoACLFound = true // ANONYMOUS administers while the cluster has no ACL
	}))
	addr := b.Addr()
	createTopic(t, addr, "open", 1)
	createTopic(t, addr, "locked", 1)

	cfg := sarama.NewConfig()
	cfg.Version = version
	cfg.ClientID = "weir-compat"
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Retry.Max = 1
	cfg.Producer.Retry.Backoff = 20 * time.Millisecond
	cfg.Metadata.Retry.Backoff = 20 * time.Millisecond
	cfg.Net.DialTimeout = 10 * time.Second
	adm, err := sarama.NewClusterAdmin([]string{addr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()

	filterVersion := 0
	if version.IsAtLeast(sarama.V2_0_0_0) {
		filterVersion = 1
	}
	locked := sarama.Resource{ResourceType: sarama.AclResourceTopic, ResourceName: "locked", ResourcePatternType: sarama.AclPatternLiteral}
	for _, acl := range []sarama.Acl{
		{Principal: "User:ANONYMOUS", Host: "*", Operation: sarama.AclOperationWrite, PermissionType: sarama.AclPermissionDeny},
		{Principal: "User:ANONYMOUS", Host: "*", Operation: sarama.AclOperationDescribe, PermissionType: sarama.AclPermissionAllow},
		{Principal: "User:other", Host: "*", Operation: sarama.AclOperationRead, PermissionType: sarama.AclPermissionAllow},
	} {
		if err := adm.CreateACL(locked, acl); err != nil {
			t.Fatalf("create ACL %+v: %v", acl, err)
		}
	}
	name := "locked"
	all := sarama.AclFilter{Version: filterVersion, ResourceType: sarama.AclResourceTopic, ResourceName: &name,
		ResourcePatternTypeFilter: sarama.AclPatternLiteral, Operation: sarama.AclOperationAny, PermissionType: sarama.AclPermissionAny}
	if filterVersion == 1 {
		all.ResourcePatternTypeFilter = sarama.AclPatternAny
	}
	listed, err := adm.ListAcls(all)
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != 1 || len(listed[0].Acls) != 3 || listed[0].ResourceName != "locked" {
		t.Fatalf("listed %+v", listed)
	}

	prod, err := sarama.NewSyncProducer([]string{addr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if _, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: "open", Value: sarama.StringEncoder("v")}); err != nil {
		t.Fatalf("produce to the open topic: %v", err)
	}
	_, _, err = prod.SendMessage(&sarama.ProducerMessage{Topic: "locked", Value: sarama.StringEncoder("v")})
	if !errors.Is(err, sarama.ErrTopicAuthorizationFailed) {
		t.Fatalf("produce to the denied topic: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}

	other := "User:other"
	del := all
	del.Principal = &other
	matched, err := adm.DeleteACL(del, false)
	if err != nil || len(matched) != 1 || matched[0].Acl.Principal != other {
		t.Fatalf("delete: %v %+v", err, matched)
	}
	if listed, err = adm.ListAcls(all); err != nil || len(listed) != 1 || len(listed[0].Acls) != 2 {
		t.Fatalf("after delete: %v %+v", err, listed)
	}

	if !version.IsAtLeast(sarama.V2_6_0_0) {
		return
	}
	ent := []sarama.QuotaEntityComponent{{EntityType: sarama.QuotaEntityUser, MatchType: sarama.QuotaMatchExact, Name: "alice"}}
	if err := adm.AlterClientQuotas(ent, sarama.ClientQuotasOp{Key: "producer_byte_rate", Value: 2048}, false); err != nil {
		t.Fatal(err)
	}
	got, err := adm.DescribeClientQuotas([]sarama.QuotaFilterComponent{{EntityType: sarama.QuotaEntityUser, MatchType: sarama.QuotaMatchExact, Match: "alice"}}, false)
	if err != nil || len(got) != 1 || got[0].Values["producer_byte_rate"] != 2048 {
		t.Fatalf("describe quotas: %v %+v", err, got)
	}
	if err := adm.AlterClientQuotas(ent, sarama.ClientQuotasOp{Key: "controller_mutation_rate", Value: 1}, false); err == nil {
		t.Fatal("an unsupported quota key was accepted")
	}
}
