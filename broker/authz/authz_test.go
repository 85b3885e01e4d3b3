package authz

import (
	"errors"
	"testing"

	"github.com/weirhq/weir/vfs"
)

func allow(rt ResourceType, pt PatternType, name, principal string, op Operation) Binding {
	return Binding{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: principal, Host: "*", Operation: op, Permission: PermAllow}
}

func deny(b Binding) Binding { b.Permission = PermDeny; return b }

func open(t *testing.T, fs vfs.FS, o Options) *Authorizer {
	t.Helper()
	o.FS, o.Dir = fs, "/data"
	if err := vfs.MkdirAllDurable(fs, "/data"); err != nil {
		t.Fatal(err)
	}
	a, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestDecisions(t *testing.T) {
	fs := vfs.NewCrashableMem()
	a := open(t, fs, Options{SuperUsers: []string{"User:admin"}})
	acls := []Binding{
		allow(ResourceTopic, PatternLiteral, "orders", "User:alice", OpRead),
		allow(ResourceTopic, PatternPrefixed, "logs-", "User:bob", OpWrite),
		deny(allow(ResourceTopic, PatternLiteral, "logs-secret", "User:bob", OpWrite)),
		allow(ResourceTopic, PatternLiteral, "*", "User:carol", OpDescribe),
		allow(ResourceGroup, PatternLiteral, "g", "User:*", OpRead),
		deny(allow(ResourceGroup, PatternLiteral, "g", "User:mallory", OpAll)),
		allow(ResourceCluster, PatternLiteral, ClusterName, "User:ops", OpAlterConfigs),
		{ResourceType: ResourceTopic, ResourceName: "hosted", PatternType: PatternLiteral, Principal: "User:dan", Host: "10.0.0.1", Operation: OpAll, Permission: PermAllow},
		deny(allow(ResourceTopic, PatternLiteral, "orders", "User:erin", OpRead)),
		allow(ResourceTopic, PatternLiteral, "orders", "User:erin", OpWrite),
	}
	errs, err := a.Create(acls)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range errs {
		if e != nil {
			t.Fatalf("acl %d: %v", i, e)
		}
	}
	cases := []struct {
		who, host string
		op        Operation
		rt        ResourceType
		name      string
		want      bool
	}{
		{"User:alice", "1.2.3.4", OpRead, ResourceTopic, "orders", true},
		{"User:alice", "1.2.3.4", OpDescribe, ResourceTopic, "orders", true}, // READ implies DESCRIBE
		{"User:alice", "1.2.3.4", OpWrite, ResourceTopic, "orders", false},
		{"User:alice", "1.2.3.4", OpRead, ResourceTopic, "orders2", false}, // no ACL: allow.everyone false
		{"User:bob", "h", OpWrite, ResourceTopic, "logs-a", true},          // prefixed
		{"User:bob", "h", OpWrite, ResourceTopic, "logs-secret", false},    // deny wins
		{"User:bob", "h", OpDescribe, ResourceTopic, "logs-secret", false}, // WRITE denied on it; only the prefixed allow: DESCRIBE implied? see below
		{"User:bob", "h", OpWrite, ResourceTopic, "log", false},
		{"User:carol", "h", OpDescribe, ResourceTopic, "anything", true}, // wildcard
		{"User:carol", "h", OpRead, ResourceTopic, "anything", false},
		{"User:zed", "h", OpRead, ResourceGroup, "g", true}, // User:*
		{"User:mallory", "h", OpRead, ResourceGroup, "g", false},
		{"User:ops", "h", OpDescribeConfigs, ResourceCluster, ClusterName, true}, // ALTER_CONFIGS implies DESCRIBE_CONFIGS
		{"User:ops", "h", OpAlter, ResourceCluster, ClusterName, false},
		{"User:dan", "10.0.0.1", OpDelete, ResourceTopic, "hosted", true},
		{"User:dan", "10.0.0.2", OpDelete, ResourceTopic, "hosted", false},
		{"User:admin", "h", OpAlter, ResourceCluster, ClusterName, true}, // super user
		{"User:erin", "h", OpRead, ResourceTopic, "orders", false},
		{"User:erin", "h", OpDescribe, ResourceTopic, "orders", true}, // a DENY READ does not deny the DESCRIBE that WRITE implies
	}
	// bob on logs-secret: the deny names WRITE, not DESCRIBE, so the
	// prefixed WRITE's implied DESCRIBE still allows it (Kafka's rule).
	cases[6].want = true
	for _, c := range cases {
		if got := a.Allowed(c.who, c.host, c.op, c.rt, c.name); got != c.want {
			t.Errorf("%s@%s %s %s:%s = %v, want %v", c.who, c.host, c.op, c.rt, c.name, got, c.want)
		}
	}

	// allow.everyone.if.no.acl.found applies only where no ACL matches.
	b := open(t, fs, Options{AllowEveryoneIfNoACLFound: true})
	if !b.Allowed("User:x", "h", OpRead, ResourceGroup, "unprotected") {
		t.Error("no ACL with allow.everyone: refused")
	}
	if b.Allowed("User:x", "h", OpRead, ResourceTopic, "orders") {
		t.Error("ACL exists for orders but not for User:x: allowed")
	}
}

func TestAllowedAny(t *testing.T) {
	a := open(t, vfs.NewCrashableMem(), Options{})
	if a.AllowedAny("User:a", "h", OpWrite, ResourceTopic) {
		t.Fatal("no ACLs: allowed")
	}
	mustCreate(t, a, allow(ResourceTopic, PatternPrefixed, "app-", "User:a", OpWrite))
	if !a.AllowedAny("User:a", "h", OpWrite, ResourceTopic) || a.AllowedAny("User:b", "h", OpWrite, ResourceTopic) {
		t.Fatal("prefixed write: wrong AllowedAny")
	}
	mustCreate(t, a, deny(allow(ResourceTopic, PatternPrefixed, "app", "User:a", OpWrite)))
	if a.AllowedAny("User:a", "h", OpWrite, ResourceTopic) {
		t.Fatal("allow covered by a shorter prefixed deny: allowed")
	}
	mustCreate(t, a, allow(ResourceTopic, PatternLiteral, "other", "User:a", OpWrite))
	if !a.AllowedAny("User:a", "h", OpWrite, ResourceTopic) {
		t.Fatal("uncovered literal allow: refused")
	}
	mustCreate(t, a, deny(allow(ResourceTopic, PatternLiteral, "*", "User:a", OpAll)))
	if a.AllowedAny("User:a", "h", OpWrite, ResourceTopic) {
		t.Fatal("wildcard deny: allowed")
	}
}

func mustCreate(t *testing.T, a *Authorizer, bs ...Binding) {
	t.Helper()
	errs, err := a.Create(bs)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range errs {
		if e != nil {
			t.Fatal(e)
		}
	}
}

func TestFiltersDeleteAndDurability(t *testing.T) {
	fs := vfs.NewCrashableMem()
	a := open(t, fs, Options{})
	x := allow(ResourceTopic, PatternLiteral, "foo", "User:a", OpRead)
	y := allow(ResourceTopic, PatternPrefixed, "fo", "User:b", OpWrite)
	z := allow(ResourceTopic, PatternLiteral, "*", "User:c", OpDescribe)
	g := allow(ResourceGroup, PatternLiteral, "foo", "User:a", OpRead)
	mustCreate(t, a, x, y, z, g, x) // x twice: stored once
	if got := a.ACLs(Filter{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpAny, Permission: PermAny}); len(got) != 4 {
		t.Fatalf("all: %v", got)
	}
	foo := "foo"
	if got := a.ACLs(Filter{ResourceType: ResourceTopic, ResourceName: &foo, PatternType: PatternMatch, Operation: OpAny, Permission: PermAny}); len(got) != 3 {
		t.Fatalf("MATCH foo: %v", got)
	}
	if got := a.ACLs(Filter{ResourceType: ResourceTopic, ResourceName: &foo, PatternType: PatternLiteral, Operation: OpAny, Permission: PermAny}); len(got) != 1 || got[0] != x {
		t.Fatalf("LITERAL foo: %v", got)
	}
	pb := "User:b"
	if got := a.ACLs(Filter{ResourceType: ResourceAny, PatternType: PatternAny, Principal: &pb, Operation: OpWrite, Permission: PermAllow}); len(got) != 1 || got[0] != y {
		t.Fatalf("principal filter: %v", got)
	}

	// Invalid bindings are refused one by one.
	errs, err := a.Create([]Binding{
		allow(ResourceGroup, PatternLiteral, "g", "User:a", OpWrite),       // WRITE is not a group op
		allow(ResourceCluster, PatternLiteral, "other", "User:a", OpAlter), // cluster name
		allow(ResourceTopic, PatternLiteral, "t", "alice", OpRead),         // principal form
		allow(ResourceTopic, PatternMatch, "t", "User:a", OpRead),          // filter-only pattern
		allow(ResourceTopic, PatternLiteral, "t", "User:a", OpRead),        // fine
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range errs[:4] {
		if !errors.Is(e, ErrInvalid) {
			t.Errorf("invalid binding %d: err %v", i, e)
		}
	}
	if errs[4] != nil {
		t.Errorf("valid binding: %v", errs[4])
	}

	del, err := a.Delete([]Filter{{ResourceType: ResourceTopic, ResourceName: &foo, PatternType: PatternMatch, Operation: OpAny, Permission: PermAny}})
	if err != nil || len(del[0]) != 3 {
		t.Fatalf("delete: %v %v", del, err)
	}

	// Only what was synced survives a crash, and it all was.
	crashed := fs.CrashClone()
	b := open(t, crashed, Options{})
	got := b.ACLs(Filter{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpAny, Permission: PermAny})
	if len(got) != 2 || got[0] != g || got[1].ResourceName != "t" {
		t.Fatalf("after crash: %v", got)
	}
}

func TestCorruptFile(t *testing.T) {
	fs := vfs.NewCrashableMem()
	_ = vfs.MkdirAllDurable(fs, "/data")
	if err := vfs.WriteFileAtomic(fs, "/data/"+File, []byte(`{"magic":"weir-acls","version":1,"acls":[{"resource_type":2,"resource_name":"","pattern_type":3}]}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{FS: fs, Dir: "/data"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("invalid stored acl: %v", err)
	}
	_ = vfs.WriteFileAtomic(fs, "/data/"+File, []byte(`{"magic":"nope"}`))
	if _, err := Open(Options{FS: fs, Dir: "/data"}); err == nil {
		t.Fatal("bad magic accepted")
	}
}

func TestParse(t *testing.T) {
	if op, err := ParseOperation("describe-configs"); err != nil || op != OpDescribeConfigs {
		t.Fatal(op, err)
	}
	if rt, err := ParseResourceType("transactional_id"); err != nil || rt != ResourceTransactionalID {
		t.Fatal(rt, err)
	}
	if _, err := ParsePermission("maybe"); !errors.Is(err, ErrInvalid) {
		t.Fatal(err)
	}
}
