package authz

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/weirhq/weir/vfs"
)

// modelAllowed is the package doc's decision procedure written as plainly
// as possible: a linear scan over every ACL.
func modelAllowed(acls []Binding, super map[string]bool, everyone bool, principal, host string, op Operation, rt ResourceType, name string) bool {
	if super[principal] {
		return true
	}
	covers := func(b Binding) bool {
		if b.ResourceType != rt {
			return false
		}
		if b.PatternType == PatternPrefixed {
			return strings.HasPrefix(name, b.ResourceName)
		}
		return b.ResourceName == name || b.ResourceName == "*"
	}
	var matching []Binding
	for _, b := range acls {
		if covers(b) {
			matching = append(matching, b)
		}
	}
	if len(matching) == 0 {
		return everyone
	}
	var applying []Binding
	for _, b := range matching {
		if (b.Principal == principal || b.Principal == "User:*") && (b.Host == host || b.Host == "*") {
			applying = append(applying, b)
		}
	}
	for _, b := range applying {
		if b.Permission == PermDeny && (b.Operation == op || b.Operation == OpAll) {
			return false
		}
	}
	for _, b := range applying {
		if b.Permission != PermAllow {
			continue
		}
		g := b.Operation
		if g == op || g == OpAll ||
			op == OpDescribe && (g == OpRead || g == OpWrite || g == OpDelete || g == OpAlter) ||
			op == OpDescribeConfigs && g == OpAlterConfigs {
			return true
		}
	}
	return false
}

// TestAllowedMatchesModel compares the indexed decision with the model on
// random ACL sets and requests.
func TestAllowedMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	names := []string{"a", "ab", "abc", "b", "ba", "*"}
	principals := []string{"User:x", "User:y", "User:*"}
	hosts := []string{"h1", "h2", "*"}
	topicOps := validOps[ResourceTopic]
	for round := range 200 {
		var acls []Binding
		for range rng.IntN(12) {
			b := Binding{ResourceType: ResourceTopic, ResourceName: names[rng.IntN(len(names))], PatternType: PatternLiteral,
				Principal: principals[rng.IntN(3)], Host: hosts[rng.IntN(3)], Operation: topicOps[rng.IntN(len(topicOps))], Permission: PermAllow}
			if rng.IntN(2) == 0 && b.ResourceName != "*" {
				b.PatternType = PatternPrefixed
			}
			if rng.IntN(4) == 0 {
				b.Permission = PermDeny
			}
			if rng.IntN(8) == 0 {
				b.Operation = OpAll
			}
			if rng.IntN(6) == 0 {
				b.ResourceType = ResourceGroup
				b.Operation = OpRead
			}
			acls = append(acls, b)
		}
		everyone := rng.IntN(2) == 0
		a := open(t, vfs.NewCrashableMem(), Options{SuperUsers: []string{"User:root"}, AllowEveryoneIfNoACLFound: everyone})
		mustCreate(t, a, acls...)
		acls = a.ACLs(Filter{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpAny, Permission: PermAny})
		for range 50 {
			p := []string{"User:x", "User:y", "User:root"}[rng.IntN(3)]
			h := []string{"h1", "h2"}[rng.IntN(2)]
			op := topicOps[rng.IntN(len(topicOps))]
			rt := []ResourceType{ResourceTopic, ResourceGroup}[rng.IntN(2)]
			n := []string{"a", "ab", "abc", "abd", "b", "bab", "c", "*"}[rng.IntN(8)]
			want := modelAllowed(acls, map[string]bool{"User:root": true}, everyone, p, h, op, rt, n)
			if got := a.Allowed(p, h, op, rt, n); got != want {
				t.Fatalf("round %d: %s@%s %s %s:%s = %v, model %v; acls %v", round, p, h, op, rt, n, got, want, acls)
			}
		}
	}
}

// BenchmarkAllowed: one decision among n ACLs on other topics, indexed
// (index) and by the linear model (scan, the baseline).
func BenchmarkAllowed(b *testing.B) {
	for _, n := range []int{10, 10_000} {
		b.Run("n="+itoa(n), func(b *testing.B) {
			a, err := Open(Options{FS: vfs.NewCrashableMem(), Dir: "/"})
			if err != nil {
				b.Fatal(err)
			}
			var acls []Binding
			for i := range n {
				acls = append(acls, Binding{ResourceType: ResourceTopic, ResourceName: "topic-" + itoa(i), PatternType: PatternLiteral,
					Principal: "User:u" + itoa(i%50), Host: "*", Operation: OpRead, Permission: PermAllow})
			}
			acls = append(acls, Binding{ResourceType: ResourceTopic, ResourceName: "topic-", PatternType: PatternPrefixed,
				Principal: "User:reader", Host: "*", Operation: OpRead, Permission: PermAllow})
			a.install(acls)
			names := make([]string, n)
			for i := range names {
				names[i] = "topic-" + itoa(i)
			}
			b.Run("index", func(b *testing.B) {
				for i := range b.N {
					if !a.Allowed("User:reader", "10.0.0.1", OpDescribe, ResourceTopic, names[i%n]) {
						b.Fatal("refused")
					}
				}
			})
			b.Run("scan", func(b *testing.B) {
				for i := range b.N {
					if !modelAllowed(acls, nil, false, "User:reader", "10.0.0.1", OpDescribe, ResourceTopic, names[i%n]) {
						b.Fatal("refused")
					}
				}
			})
		})
	}
}

func itoa(i int) string {
	const digits = "0123456789"
	if i == 0 {
		return "0"
	}
	var buf [20]byte
	p := len(buf)
	for i > 0 {
		p--
		buf[p] = digits[i%10]
		i /= 10
	}
	return string(buf[p:])
}
