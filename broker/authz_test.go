package broker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// asPrincipal makes a request with client id "as:<name>" act as
// "User:<name>" (Config.principalForTest); other client ids act as the
// connection's principal (ANONYMOUS: there is no authentication here).
func asPrincipal(clientID string) string {
	if name, ok := strings.CutPrefix(clientID, "as:"); ok {
		return "User:" + name
	}
	return ""
}

// aclBroker starts a broker with the ACL authorizer and super user admin.
func aclBroker(t testing.TB, mod ...func(*Config)) (*Broker, Config) {
	return testBroker(t, append([]func(*Config){func(c *Config) {
		c.Authorizer = "acl"
		c.SuperUsers = []string{"User:admin"}
		c.principalForTest = asPrincipal
	}}, mod...)...)
}

// clientAs is a client acting as User:name.
func clientAs(t testing.TB, b *Broker, name string, opts ...kgo.Opt) *kgo.Client {
	return newClient(t, b, append([]kgo.Opt{kgo.ClientID("as:" + name)}, opts...)...)
}

func TestACLAdminWithKadm(t *testing.T) {
	b, cfg := aclBroker(t)
	ctx := testCtx(t)
	adm := kadm.NewClient(clientAs(t, b, "admin"))

	create := kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpRead, kadm.OpDescribe).
		ResourcePatternType(kadm.ACLPatternLiteral)
	res, err := adm.CreateACLs(ctx, create)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("create %v: %v", r, r.Err)
		}
	}
	pre := kadm.NewACLs().Deny("User:bob").Groups("app-").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternPrefixed)
	if _, err := adm.CreateACLs(ctx, pre); err != nil {
		t.Fatal(err)
	}

	describe := func(b *kadm.ACLBuilder) []kadm.DescribedACL {
		t.Helper()
		res, err := adm.DescribeACLs(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		var out []kadm.DescribedACL
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("describe: %v", r.Err)
			}
			out = append(out, r.Described...)
		}
		return out
	}
	all := kadm.NewACLs().AnyResource().Allow().AllowHosts().Deny().DenyHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny)
	if got := describe(all); len(got) != 3 {
		t.Fatalf("described %d ACLs, want 3: %+v", len(got), got)
	}
	// MATCH: what applies to the group "app-1" is the prefixed deny.
	match := kadm.NewACLs().Groups("app-1").Allow().AllowHosts().Deny().DenyHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternMatch)
	got := describe(match)
	if len(got) != 1 || got[0].Principal != "User:bob" || got[0].Pattern != kadm.ACLPatternPrefixed || got[0].Permission != kmsg.ACLPermissionTypeDeny {
		t.Fatalf("MATCH app-1: %+v", got)
	}

	// An invalid creation is refused alone.
	bad := kadm.NewACLs().Allow("User:alice").Groups("g").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral)
	res, err = adm.CreateACLs(ctx, bad)
	if err != nil || len(res) != 1 || !errors.Is(res[0].Err, kerr.InvalidRequest) {
		t.Fatalf("WRITE on a group: %v %+v", err, res)
	}

	// A non-super user without ALTER on the cluster may not change ACLs,
	// nor list them without DESCRIBE.
	bobAdm := kadm.NewClient(clientAs(t, b, "bob"))
	res, err = bobAdm.CreateACLs(ctx, create)
	if err != nil || len(res) == 0 || !errors.Is(res[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("bob creates: %v %+v", err, res)
	}
	dres, err := bobAdm.DescribeACLs(ctx, all)
	if err != nil || len(dres) == 0 || !errors.Is(dres[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("bob describes: %v %+v", err, dres)
	}

	// Delete the read ACL of alice; the rest stays, and survives a restart.
	del := kadm.NewACLs().Allow("User:alice").AllowHosts().Topics("orders").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral)
	dr, err := adm.DeleteACLs(ctx, del)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range dr {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		n += len(r.Deleted)
	}
	if n != 1 {
		t.Fatalf("deleted %d, want 1: %+v", n, dr)
	}
	adm.Close()
	bobAdm.Close()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b2, _ := testBroker(t, func(c *Config) {
		*c = cfg
		c.KafkaAddr = "127.0.0.1:0"
	})
	adm = kadm.NewClient(clientAs(t, b2, "admin"))
	res2, err := adm.DescribeACLs(ctx, all)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, r := range res2 {
		for _, d := range r.Described {
			left = append(left, d.Principal+" "+d.Operation.String()+" "+d.Name)
		}
	}
	if strings.Join(left, ",") != "User:alice DESCRIBE orders,User:bob READ app-" {
		t.Fatalf("after restart: %v", left)
	}
}

func TestACLsWithoutAuthorizer(t *testing.T) {
	b, _ := testBroker(t)
	ctx := testCtx(t)
	adm := kadm.NewClient(newClient(t, b))
	res, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:a").Topics("t").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral))
	if err != nil || len(res) != 1 || !errors.Is(res[0].Err, kerr.SecurityDisabled) {
		t.Fatalf("no authorizer: %v %+v", err, res)
	}
}

// A real producer and consumer: refused without ACLs, working with them.
func TestACLRealClients(t *testing.T) {
	b, _ := aclBroker(t)
	ctx := testCtx(t)
	adm := kadm.NewClient(clientAs(t, b, "admin"))
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	prod := clientAs(t, b, "alice", kgo.DefaultProduceTopic("orders"), kgo.RecordRetries(1))
	err := prod.ProduceSync(short, &kgo.Record{Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) && !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("produce without ACL: %v", err)
	}

	mustACL(t, adm, kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral))
	mustACL(t, adm, kadm.NewACLs().Allow("User:carol").Topics("orders").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral))
	mustACL(t, adm, kadm.NewACLs().Allow("User:carol").Groups("readers").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral))
	prod2 := clientAs(t, b, "alice", kgo.DefaultProduceTopic("orders"))
	for i := range 10 {
		if err := prod2.ProduceSync(ctx, &kgo.Record{Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatalf("produce with WRITE: %v", err)
		}
	}

	// alice may write, not read.
	c := clientAs(t, b, "alice", kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	sawRefusal := false
	for !sawRefusal {
		fs := c.PollFetches(short)
		if short.Err() != nil {
			t.Fatal("alice consumed no refusal")
		}
		fs.EachError(func(_ string, _ int32, err error) {
			if errors.Is(err, kerr.TopicAuthorizationFailed) {
				sawRefusal = true
			}
		})
		if fs.NumRecords() > 0 {
			t.Fatal("alice read records without READ")
		}
	}

	// carol reads them in her group.
	cc := clientAs(t, b, "carol", kgo.ConsumeTopics("orders"), kgo.ConsumerGroup("readers"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	for got < 10 {
		fs := cc.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("carol read %d/10", got)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("carol %s/%d: %v", tp, p, err) })
		got += fs.NumRecords()
	}
	if err := cc.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("carol commits: %v", err)
	}

	// Another group is refused to carol.
	other := clientAs(t, b, "carol", kgo.ConsumeTopics("orders"), kgo.ConsumerGroup("others"))
	for {
		fs := other.PollFetches(short)
		if short.Err() != nil {
			t.Fatal("no GROUP_AUTHORIZATION_FAILED for group others")
		}
		if err := fs.Err(); errors.Is(err, kerr.GroupAuthorizationFailed) {
			break
		}
	}

	// Metadata lists only the topics the principal may describe.
	tds, err := kadm.NewClient(clientAs(t, b, "dave")).ListTopics(ctx)
	if err != nil || len(tds) != 0 {
		t.Fatalf("dave lists %v (%v), want none", tds.Names(), err)
	}
	tds, err = kadm.NewClient(clientAs(t, b, "carol")).ListTopics(ctx)
	if err != nil || len(tds) != 1 || tds.Names()[0] != "orders" {
		t.Fatalf("carol lists %v (%v), want orders", tds.Names(), err)
	}
}

func mustACL(t testing.TB, adm *kadm.Client, b *kadm.ACLBuilder) {
	t.Helper()
	res, err := adm.CreateACLs(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
}

// Every served API has an authorization rule.
func TestAuthzRulesCoverEveryAPI(t *testing.T) {
	for _, a := range apiByKey {
		if a == nil {
			continue
		}
		if _, ok := authzRules[a.key]; !ok {
			t.Errorf("%s has no entry in authzRules", a.name)
		}
	}
}

// An incremental fetch session keeps serving partitions the request does
// not name: removing the READ ACL must stop them too.
func TestACLRemovedStopsFetchSession(t *testing.T) {
	b, _ := aclBroker(t)
	ctx := testCtx(t)
	adm := kadm.NewClient(clientAs(t, b, "admin"))
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "s"); err != nil {
		t.Fatal(err)
	}
	read := kadm.NewACLs().Allow("User:carol").Topics("s").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral)
	mustACL(t, adm, read)
	prod := clientAs(t, b, "admin", kgo.DefaultProduceTopic("s"))
	c := clientAs(t, b, "carol", kgo.ConsumeTopics("s"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100*time.Millisecond))
	if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("before")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for got := 0; got < 1; {
		fs := c.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("carol read nothing")
		}
		got += fs.NumRecords()
	}
	res, err := adm.DeleteACLs(ctx, kadm.NewACLs().Allow("User:carol").AllowHosts().Topics("s").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral))
	if err != nil || len(res) == 0 || len(res[0].Deleted) != 1 {
		t.Fatalf("delete: %v %+v", err, res)
	}
	if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for {
		fs := c.PollFetches(short)
		if short.Err() != nil {
			t.Fatal("no TOPIC_AUTHORIZATION_FAILED after the ACL was removed")
		}
		if fs.NumRecords() > 0 {
			t.Fatalf("read %q after the ACL was removed", fs.Records()[0].Value)
		}
		refused := false
		fs.EachError(func(_ string, _ int32, err error) { refused = refused || errors.Is(err, kerr.TopicAuthorizationFailed) })
		if refused {
			return
		}
	}
}

// KIP-430 authorized operations with an authorizer: what the principal's
// ACLs allow, implied operations included.
func TestAuthorizedOperationsFromACLs(t *testing.T) {
	b, _ := aclBroker(t)
	ctx := testCtx(t)
	adm := kadm.NewClient(clientAs(t, b, "admin"))
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "ops"); err != nil {
		t.Fatal(err)
	}
	mustACL(t, adm, kadm.NewACLs().Allow("User:erin").Topics("ops").Operations(kadm.OpRead, kadm.OpAlterConfigs).ResourcePatternType(kadm.ACLPatternLiteral))
	mustACL(t, adm, kadm.NewACLs().Allow("User:erin").Clusters().Operations(kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral))
	cl := clientAs(t, b, "erin")
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("ops")
	req.Topics = append(req.Topics, rt)
	req.IncludeTopicAuthorizedOperations = true
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"ALTER_CONFIGS", "DESCRIBE", "DESCRIBE_CONFIGS", "READ"}
	if got := aclOpNames(resp.Topics[0].AuthorizedOperations); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("topic operations %v, want %v", got, want)
	}
	// A topic that does not exist yet: the operations its name's ACLs
	// allow, as Kafka answers them (with UNKNOWN_TOPIC_OR_PARTITION).
	mustACL(t, adm, kadm.NewACLs().Allow("User:erin").Topics("later-").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternPrefixed))
	rt.Topic = kmsg.StringPtr("later-topic")
	req.Topics = []kmsg.MetadataRequestTopic{rt}
	req.AllowAutoTopicCreation = false
	if resp, err = req.RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	}
	if got := aclOpNames(resp.Topics[0].AuthorizedOperations); resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code || strings.Join(got, ",") != "DESCRIBE,WRITE" {
		t.Fatalf("missing topic: error %d, operations %v; want UNKNOWN_TOPIC_OR_PARTITION and DESCRIBE,WRITE", resp.Topics[0].ErrorCode, got)
	}
	dreq := kmsg.NewPtrDescribeClusterRequest()
	dreq.IncludeClusterAuthorizedOperations = true
	dresp, err := dreq.RequestWith(ctx, cl)
	if err != nil || dresp.ErrorCode != 0 {
		t.Fatal(err, dresp.ErrorCode)
	}
	if got := aclOpNames(dresp.ClusterAuthorizedOperations); strings.Join(got, ",") != "DESCRIBE" {
		t.Fatalf("cluster operations %v", got)
	}
}

// Prefixed ALLOW, literal DENY, super users and the wildcard principal,
// end to end through a real producer.
func TestACLPrefixedDenyWinsSuperUser(t *testing.T) {
	b, _ := aclBroker(t)
	ctx := testCtx(t)
	adm := kadm.NewClient(clientAs(t, b, "admin"))
	for _, name := range []string{"app-1", "app-secret", "public"} {
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, name); err != nil {
			t.Fatal(err)
		}
	}
	mustACL(t, adm, kadm.NewACLs().Allow("User:dan").Topics("app-").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternPrefixed))
	mustACL(t, adm, kadm.NewACLs().Deny("User:dan").Topics("app-secret").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral))
	mustACL(t, adm, kadm.NewACLs().Allow("User:*").Topics("public").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral))
	produce := func(who, topic string) error {
		cl := clientAs(t, b, who, kgo.DefaultProduceTopic(topic), kgo.RecordRetries(1))
		short, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return cl.ProduceSync(short, &kgo.Record{Value: []byte("v")}).FirstErr()
	}
	for _, tc := range []struct {
		who, topic string
		ok         bool
	}{
		{"dan", "app-1", true},
		{"dan", "app-secret", false}, // deny wins over the prefixed allow
		{"dan", "public", true},      // User:*
		{"zoe", "public", true},
		{"zoe", "app-1", false},
		{"admin", "app-secret", true}, // super user
	} {
		err := produce(tc.who, tc.topic)
		if tc.ok && err != nil {
			t.Errorf("%s -> %s: %v", tc.who, tc.topic, err)
		}
		if !tc.ok && !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Errorf("%s -> %s: %v, want TOPIC_AUTHORIZATION_FAILED", tc.who, tc.topic, err)
		}
	}
}

// acks=0 gets no response, so a refused topic closes the connection (as
// Kafka does for any acks=0 error); the allowed topics of the request are
// still appended.
func TestACLAcksZeroRefusalCloses(t *testing.T) {
	b, _ := aclBroker(t)
	ctx := testCtx(t)
	adm := kadm.NewClient(clientAs(t, b, "admin"))
	for _, name := range []string{"ok0", "no0"} {
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, name); err != nil {
			t.Fatal(err)
		}
	}
	mustACL(t, adm, kadm.NewACLs().Allow("User:p0").Topics("ok0").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral))

	// Allowed only: no response, the connection stays usable.
	rc := dialRaw(t, b)
	rc.write(frameAs(produceReq(9, 0, "ok0", 0, makeBatch(1, "a")), 1, "as:p0"))
	av := kmsg.NewPtrApiVersionsRequest()
	rc.write(frameAs(av, 2, "as:p0"))
	if r := rc.readResp(av, 2).(*kmsg.ApiVersionsResponse); r.ErrorCode != 0 {
		t.Fatalf("ApiVersions after an allowed acks=0 produce: %d", r.ErrorCode)
	}

	// Allowed and refused together: the allowed one is appended, then
	// the connection is closed.
	req := produceReq(9, 0, "ok0", 0, makeBatch(1, "b"))
	req.Topics = append(req.Topics, produceReq(9, 0, "no0", 0, makeBatch(1, "c")).Topics...)
	rc2 := dialRaw(t, b)
	rc2.write(frameAs(req, 1, "as:p0"))
	rc2.expectClosed()
	for name, want := range map[string]int64{"ok0": 2, "no0": 0} {
		tp, _ := b.topics.get(name)
		if leo := tp.parts[0].LogEndOffset(); leo != want {
			t.Errorf("%s log end offset %d, want %d", name, leo, want)
		}
	}
}
