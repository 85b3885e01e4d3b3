package authz

import (
	"encoding/json"
	"errors"
	"fmt"
	iofs "io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/weirhq/weir/vfs"
)

// File is the name of the ACL file in the data directory.
//
//	<data dir>/acls.json  {"magic":"weir-acls","version":1,"acls":[Binding...]}
//
// It is replaced atomically (written to a temporary file, fsynced, renamed,
// directory fsynced): a crash leaves either the old or the new set. An
// ACL change is acknowledged only after its file is durable, and applies to
// requests authorized after the change returns.
const File = "acls.json"

const (
	fileMagic   = "weir-acls"
	fileVersion = 1
)

type fileJSON struct {
	Magic   string    `json:"magic"`
	Version int       `json:"version"`
	ACLs    []Binding `json:"acls"`
}

// Options configures an Authorizer.
type Options struct {
	// FS and Dir locate the ACL file (Dir/acls.json).
	FS  vfs.FS
	Dir string
	// SuperUsers are principals allowed everything (super.users).
	SuperUsers []string
	// AllowEveryoneIfNoACLFound allows a request on a resource that no ACL
	// matches (allow.everyone.if.no.acl.found, default false).
	AllowEveryoneIfNoACLFound bool
}

// Authorizer decides requests against a durable set of ACLs. It is safe for
// concurrent use: decisions take a read lock on an immutable snapshot;
// changes are serialised and persisted before they are installed.
type Authorizer struct {
	opts  Options
	super map[string]bool

	mu  sync.RWMutex // guards set (replaced, never modified)
	set *aclSet
	wmu sync.Mutex // serialises changes; held across persistence
}

// aclSet is an immutable set of ACLs indexed for decisions: a decision
// looks up the literal name, the literal wildcard, and every prefix of the
// name, so its cost does not grow with the number of ACLs on other
// resources.
type aclSet struct {
	all      []Binding
	literal  map[resKey][]int // indexes into all
	prefixed map[resKey][]int
}

type resKey struct {
	rt   ResourceType
	name string
}

func newACLSet(all []Binding) *aclSet {
	s := &aclSet{all: all, literal: map[resKey][]int{}, prefixed: map[resKey][]int{}}
	for i, b := range all {
		k := resKey{b.ResourceType, b.ResourceName}
		if b.PatternType == PatternPrefixed {
			s.prefixed[k] = append(s.prefixed[k], i)
		} else {
			s.literal[k] = append(s.literal[k], i)
		}
	}
	return s
}

// each calls f with every ACL whose pattern covers the resource (rt, name).
func (s *aclSet) each(rt ResourceType, name string, f func(b *Binding)) {
	for _, i := range s.literal[resKey{rt, name}] {
		f(&s.all[i])
	}
	if name != Wildcard {
		for _, i := range s.literal[resKey{rt, Wildcard}] {
			f(&s.all[i])
		}
	}
	if len(s.prefixed) == 0 {
		return
	}
	for n := 1; n <= len(name); n++ {
		for _, i := range s.prefixed[resKey{rt, name[:n]}] {
			f(&s.all[i])
		}
	}
}

// Open loads the ACL file (none yet: no ACLs).
func Open(opts Options) (*Authorizer, error) {
	if opts.FS == nil {
		opts.FS = vfs.Default
	}
	a := &Authorizer{opts: opts, super: map[string]bool{}, set: newACLSet(nil)}
	for _, s := range opts.SuperUsers {
		a.super[s] = true
	}
	data, err := vfs.ReadFile(opts.FS, filepath.Join(opts.Dir, File))
	if err != nil {
		if errors.Is(err, iofs.ErrNotExist) {
			return a, nil
		}
		return nil, fmt.Errorf("authz: read %s: %w", File, err)
	}
	var f fileJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("authz: decode %s: %w", File, err)
	}
	if f.Magic != fileMagic || f.Version != fileVersion {
		return nil, fmt.Errorf("authz: %s: unsupported magic %q version %d", File, f.Magic, f.Version)
	}
	for _, b := range f.ACLs {
		if err := b.Validate(); err != nil {
			return nil, fmt.Errorf("authz: %s: %s: %w", File, b, err)
		}
	}
	a.set = newACLSet(f.ACLs)
	return a, nil
}

// IsSuperUser reports whether principal is a super user.
func (a *Authorizer) IsSuperUser(principal string) bool { return a.super[principal] }

// Allowed reports whether principal, connected from host (an IP address,
// without Kafka's leading '/'), may perform op on the resource (rt, name).
// See the package doc for the decision procedure.
func (a *Authorizer) Allowed(principal, host string, op Operation, rt ResourceType, name string) bool {
	if a.super[principal] {
		return true
	}
	set := a.current()
	matched, allowed, denied := false, false, false
	set.each(rt, name, func(b *Binding) {
		matched = true
		if denied || (b.Principal != principal && b.Principal != WildcardPrincipal) || (b.Host != host && b.Host != Wildcard) {
			return
		}
		if b.Permission == PermDeny {
			denied = b.Operation == op || b.Operation == OpAll
			return
		}
		allowed = allowed || implies(b.Operation, op)
	})
	switch {
	case denied:
		return false
	case !matched:
		return a.opts.AllowEveryoneIfNoACLFound
	}
	return allowed
}

// AllowedAny reports whether principal may perform op on some resource of
// type rt: Kafka's authorizeByResourceType, which InitProducerId uses for
// "WRITE on any topic". It is true if a super user; or if an ALLOW of op
// (or an implying operation) applies on some pattern of type rt that no
// DENY of op covers (a DENY on a LITERAL "*" or covering PREFIXED pattern
// covers it); or, with allow.everyone.if.no.acl.found, if no ACL of type
// rt exists.
func (a *Authorizer) AllowedAny(principal, host string, op Operation, rt ResourceType) bool {
	if a.super[principal] {
		return true
	}
	acls := a.current().all
	applies := func(b *Binding) bool {
		return b.ResourceType == rt && (b.Principal == principal || b.Principal == WildcardPrincipal) &&
			(b.Host == host || b.Host == Wildcard)
	}
	any := false
	for i := range acls {
		b := &acls[i]
		any = any || b.ResourceType == rt
		if !applies(b) || b.Permission != PermAllow || !implies(b.Operation, op) {
			continue
		}
		denied := false
		for j := range acls {
			d := &acls[j]
			if applies(d) && d.Permission == PermDeny && (d.Operation == op || d.Operation == OpAll) && covers(*d, *b) {
				denied = true
				break
			}
		}
		if !denied {
			return true
		}
	}
	return !any && a.opts.AllowEveryoneIfNoACLFound
}

// covers reports whether every resource pattern p names is also named by
// d: d is the wildcard, a prefix of p's name, or the same pattern.
func covers(d, p Binding) bool {
	switch {
	case d.PatternType == PatternLiteral && d.ResourceName == Wildcard:
		return true
	case d.PatternType == PatternPrefixed:
		return strings.HasPrefix(p.ResourceName, d.ResourceName)
	}
	return d.PatternType == p.PatternType && d.ResourceName == p.ResourceName
}

// implies reports whether an ALLOW of granted allows want.
func implies(granted, want Operation) bool {
	switch {
	case granted == want || granted == OpAll:
		return true
	case want == OpDescribe:
		return granted == OpRead || granted == OpWrite || granted == OpDelete || granted == OpAlter
	case want == OpDescribeConfigs:
		return granted == OpAlterConfigs
	}
	return false
}

// ACLs returns the bindings f selects, in creation order.
func (a *Authorizer) ACLs(f Filter) []Binding {
	acls := a.current().all
	var out []Binding
	for _, b := range acls {
		if f.Matches(b) {
			out = append(out, b)
		}
	}
	return out
}

// Create adds bindings (each validated first; an existing one is not
// duplicated) and persists the set. errs[i] is the outcome of bindings[i];
// err is a persistence failure, in which case nothing changed.
func (a *Authorizer) Create(bindings []Binding) (errs []error, err error) {
	a.wmu.Lock()
	defer a.wmu.Unlock()
	next := slices.Clone(a.snapshot())
	errs = make([]error, len(bindings))
	for i, b := range bindings {
		if errs[i] = b.Validate(); errs[i] != nil {
			continue
		}
		if !slices.Contains(next, b) {
			next = append(next, b)
		}
	}
	if err := a.persist(next); err != nil {
		return nil, err
	}
	a.install(next)
	return errs, nil
}

// Delete removes the bindings each filter selects and persists the set.
// deleted[i] lists what filters[i] selected (a binding two filters select
// is listed under both, as Kafka does); err is a persistence failure, in
// which case nothing changed.
func (a *Authorizer) Delete(filters []Filter) (deleted [][]Binding, err error) {
	a.wmu.Lock()
	defer a.wmu.Unlock()
	cur := a.snapshot()
	deleted = make([][]Binding, len(filters))
	gone := make([]bool, len(cur))
	for i, f := range filters {
		for j, b := range cur {
			if f.Matches(b) {
				deleted[i] = append(deleted[i], b)
				gone[j] = true
			}
		}
	}
	next := make([]Binding, 0, len(cur))
	for j, b := range cur {
		if !gone[j] {
			next = append(next, b)
		}
	}
	if len(next) == len(cur) {
		return deleted, nil
	}
	if err := a.persist(next); err != nil {
		return nil, err
	}
	a.install(next)
	return deleted, nil
}

func (a *Authorizer) current() *aclSet {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.set
}

func (a *Authorizer) snapshot() []Binding { return a.current().all }

func (a *Authorizer) install(acls []Binding) {
	set := newACLSet(acls)
	a.mu.Lock()
	a.set = set
	a.mu.Unlock()
}

func (a *Authorizer) persist(acls []Binding) error {
	data, err := json.MarshalIndent(fileJSON{Magic: fileMagic, Version: fileVersion, ACLs: acls}, "", "  ")
	if err != nil {
		return err
	}
	if err := vfs.WriteFileAtomic(a.opts.FS, filepath.Join(a.opts.Dir, File), data); err != nil {
		return fmt.Errorf("authz: persist %s: %w", File, err)
	}
	return nil
}
