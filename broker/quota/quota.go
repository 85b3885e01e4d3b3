// Package quota is weir's client quotas, as Kafka's: produce and fetch byte
// rates and request-time percentage per user and/or client id, with
// defaults; a durable store of the quota configs; the resolution of the
// quota that applies to a request; and rate sensors that turn a quota
// violation into a throttle time. It knows nothing of the wire protocol.
//
// Entities (Kafka's precedence, first match wins, per quota key):
//
//  1. user=U, client-id=C        5. user=<default>, client-id=<default>
//  2. user=U, client-id=<default> 6. user=<default>
//  3. user=U                      7. client-id=C
//  4. user=<default>, client-id=C 8. client-id=<default>
//
// The rate is measured per (user, client id) as far as the matching entity
// names them: a quota set for user=U (or the user default) is shared by
// every client id of U; one set for client-id=C by every user of C.
//
// Throttling: each sensor is a token bucket refilled at the quota Q per
// second, holding at most one burst (Q × 1 s). A request takes its bytes
// (or its request time, in percent-seconds) from the bucket; a request that
// leaves it in debt earns a throttle time of debt / Q. A client that waits
// its throttle times out is held to Q: over any span T it sends at most
// Q × T + one burst + one request. Kafka measures a rate over 11 one-second
// samples instead, which lets a client burst whenever an old sample leaves
// the window (a throttled client oscillates around Q by far more than
// 10% over 10 s); the bucket keeps Kafka's quotas, units and throttle
// protocol and removes the oscillation.
package quota

import (
	"encoding/json"
	"errors"
	"fmt"
	iofs "io/fs"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/weirhq/weir/vfs"
)

// Quota keys (Kafka's config names).
const (
	ProducerByteRate  = "producer_byte_rate"
	ConsumerByteRate  = "consumer_byte_rate"
	RequestPercentage = "request_percentage"
)

// Keys lists the quota keys weir enforces.
var Keys = []string{ProducerByteRate, ConsumerByteRate, RequestPercentage}

// Entity types.
const (
	EntityUser     = "user"
	EntityClientID = "client-id"
)

// ErrInvalid is wrapped by every error about a malformed entity or op.
var ErrInvalid = errors.New("invalid quota")

// Component is one part of an entity: a type and a name (nil: the default).
type Component struct {
	Type string  `json:"type"`
	Name *string `json:"name,omitempty"`
}

// Entity is a set of components, at most one per type, kept sorted by type.
type Entity []Component

func (e Entity) String() string {
	parts := make([]string, len(e))
	for i, c := range e {
		n := "<default>"
		if c.Name != nil {
			n = *c.Name
		}
		parts[i] = c.Type + "=" + n
	}
	return strings.Join(parts, ",")
}

// key is the entity's identity as a map key.
func (e Entity) key() string {
	var b strings.Builder
	for _, c := range e {
		b.WriteString(c.Type)
		if c.Name == nil {
			b.WriteString("\x00d")
		} else {
			b.WriteString("\x00n")
			b.WriteString(*c.Name)
		}
		b.WriteByte(0)
	}
	return b.String()
}

// Normalize validates e (known types user and client-id, each at most
// once, at least one) and returns it sorted.
func (e Entity) Normalize() (Entity, error) {
	if len(e) == 0 {
		return nil, fmt.Errorf("%w: empty entity", ErrInvalid)
	}
	out := slices.Clone(e)
	sort.Slice(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	for i, c := range out {
		if c.Type != EntityUser && c.Type != EntityClientID {
			return nil, fmt.Errorf("%w: entity type %q (weir supports user and client-id)", ErrInvalid, c.Type)
		}
		if i > 0 && out[i-1].Type == c.Type {
			return nil, fmt.Errorf("%w: entity type %q given twice", ErrInvalid, c.Type)
		}
	}
	return out, nil
}

// ValidateValue reports a value Kafka refuses for key.
func ValidateValue(key string, v float64) error {
	switch key {
	case ProducerByteRate, ConsumerByteRate, RequestPercentage:
	default:
		return fmt.Errorf("%w: key %q (weir supports %s)", ErrInvalid, key, strings.Join(Keys, ", "))
	}
	if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("%w: %s must be a positive number, got %v", ErrInvalid, key, v)
	}
	if key != RequestPercentage && v != math.Trunc(v) {
		return fmt.Errorf("%w: %s must be a whole number of bytes, got %v", ErrInvalid, key, v)
	}
	return nil
}

// Op sets (or with Remove, removes) one quota key of an entity.
type Op struct {
	Key    string
	Value  float64
	Remove bool
}

// File is the quota file in the data directory:
//
//	<data dir>/quotas.json {"magic":"weir-quotas","version":1,"entries":[{"entity":[...],"values":{...}}]}
//
// replaced atomically like the ACL file; a change is acknowledged once its
// file is durable.
const File = "quotas.json"

const (
	fileMagic   = "weir-quotas"
	fileVersion = 1
)

type entryJSON struct {
	Entity Entity             `json:"entity"`
	Values map[string]float64 `json:"values"`
}

type fileJSON struct {
	Magic   string      `json:"magic"`
	Version int         `json:"version"`
	Entries []entryJSON `json:"entries"`
}

// Store holds the quota configs. Safe for concurrent use; readers see an
// immutable snapshot, changes are persisted before they are installed.
type Store struct {
	fs  vfs.FS
	dir string

	mu      sync.RWMutex
	entries map[string]entryJSON // by Entity.key
	index   map[entKey]map[string]float64
	wmu     sync.Mutex // serialises changes
}

// entKey identifies an entity without allocating: which types it has, and
// for each either a name or the default.
type entKey struct {
	hasUser, userDefault     bool
	user                     string
	hasClient, clientDefault bool
	client                   string
}

func keyOf(e Entity) entKey {
	var k entKey
	for _, c := range e {
		switch c.Type {
		case EntityUser:
			k.hasUser, k.userDefault = true, c.Name == nil
			if c.Name != nil {
				k.user = *c.Name
			}
		case EntityClientID:
			k.hasClient, k.clientDefault = true, c.Name == nil
			if c.Name != nil {
				k.client = *c.Name
			}
		}
	}
	return k
}

func indexOf(entries map[string]entryJSON) map[entKey]map[string]float64 {
	idx := make(map[entKey]map[string]float64, len(entries))
	for _, e := range entries {
		idx[keyOf(e.Entity)] = e.Values
	}
	return idx
}

// Open loads the quota file (none yet: no quotas).
func Open(fsys vfs.FS, dir string) (*Store, error) {
	if fsys == nil {
		fsys = vfs.Default
	}
	s := &Store{fs: fsys, dir: dir, entries: map[string]entryJSON{}, index: map[entKey]map[string]float64{}}
	data, err := vfs.ReadFile(fsys, filepath.Join(dir, File))
	if err != nil {
		if errors.Is(err, iofs.ErrNotExist) {
			return s, nil
		}
		return nil, fmt.Errorf("quota: read %s: %w", File, err)
	}
	var f fileJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("quota: decode %s: %w", File, err)
	}
	if f.Magic != fileMagic || f.Version != fileVersion {
		return nil, fmt.Errorf("quota: %s: unsupported magic %q version %d", File, f.Magic, f.Version)
	}
	for _, e := range f.Entries {
		ent, err := e.Entity.Normalize()
		if err != nil {
			return nil, fmt.Errorf("quota: %s: %w", File, err)
		}
		for k, v := range e.Values {
			if err := ValidateValue(k, v); err != nil {
				return nil, fmt.Errorf("quota: %s: %s: %w", File, ent, err)
			}
		}
		s.entries[ent.key()] = entryJSON{Entity: ent, Values: e.Values}
	}
	s.index = indexOf(s.entries)
	return s, nil
}

// Alter applies ops to entity (validated first; nothing applies on an
// error) and persists the result unless validateOnly.
func (s *Store) Alter(entity Entity, ops []Op, validateOnly bool) error {
	ent, err := entity.Normalize()
	if err != nil {
		return err
	}
	for _, op := range ops {
		if op.Remove {
			if !slices.Contains(Keys, op.Key) {
				return fmt.Errorf("%w: key %q", ErrInvalid, op.Key)
			}
			continue
		}
		if err := ValidateValue(op.Key, op.Value); err != nil {
			return err
		}
	}
	if validateOnly {
		return nil
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.RLock()
	next := make(map[string]entryJSON, len(s.entries)+1)
	for k, v := range s.entries {
		next[k] = v
	}
	s.mu.RUnlock()
	k := ent.key()
	vals := map[string]float64{}
	for kk, v := range next[k].Values {
		vals[kk] = v
	}
	for _, op := range ops {
		if op.Remove {
			delete(vals, op.Key)
		} else {
			vals[op.Key] = op.Value
		}
	}
	if len(vals) == 0 {
		delete(next, k)
	} else {
		next[k] = entryJSON{Entity: ent, Values: vals}
	}
	if err := s.persist(next); err != nil {
		return err
	}
	idx := indexOf(next)
	s.mu.Lock()
	s.entries, s.index = next, idx
	s.mu.Unlock()
	return nil
}

func (s *Store) persist(entries map[string]entryJSON) error {
	f := fileJSON{Magic: fileMagic, Version: fileVersion, Entries: []entryJSON{}}
	for _, e := range entries {
		f.Entries = append(f.Entries, e)
	}
	sort.Slice(f.Entries, func(i, j int) bool { return f.Entries[i].Entity.key() < f.Entries[j].Entity.key() })
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	if err := vfs.WriteFileAtomic(s.fs, filepath.Join(s.dir, File), data); err != nil {
		return fmt.Errorf("quota: persist %s: %w", File, err)
	}
	return nil
}

// MatchType is how a describe filter component matches (Kafka's values).
type MatchType int8

const (
	MatchExact     MatchType = 0 // the named entity
	MatchDefault   MatchType = 1 // the default entity of the type
	MatchSpecified MatchType = 2 // any named (non-default) entity of the type
)

// FilterComponent selects entities by one type.
type FilterComponent struct {
	Type  string
	Match MatchType
	Name  *string // MatchExact only
}

// Described is one entity with its values.
type Described struct {
	Entity Entity
	Values map[string]float64
}

// Describe returns the entities the filter selects (DescribeClientQuotas):
// each component must match a component of the entity; strict also
// refuses entities with components of other types.
func (s *Store) Describe(filter []FilterComponent, strict bool) ([]Described, error) {
	seen := map[string]bool{}
	for _, f := range filter {
		if f.Type != EntityUser && f.Type != EntityClientID {
			return nil, fmt.Errorf("%w: entity type %q", ErrInvalid, f.Type)
		}
		if seen[f.Type] {
			return nil, fmt.Errorf("%w: entity type %q filtered twice", ErrInvalid, f.Type)
		}
		seen[f.Type] = true
		if f.Match == MatchExact && f.Name == nil || f.Match < MatchExact || f.Match > MatchSpecified {
			return nil, fmt.Errorf("%w: bad match for %q", ErrInvalid, f.Type)
		}
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []Described
	for _, e := range s.entries {
		if strict && len(e.Entity) != len(filter) {
			continue
		}
		ok := true
		for _, f := range filter {
			c, found := component(e.Entity, f.Type)
			switch {
			case !found:
				ok = false
			case f.Match == MatchExact:
				ok = ok && c.Name != nil && *c.Name == *f.Name
			case f.Match == MatchDefault:
				ok = ok && c.Name == nil
			case f.Match == MatchSpecified:
				ok = ok && c.Name != nil
			}
		}
		if ok {
			vals := make(map[string]float64, len(e.Values))
			for k, v := range e.Values {
				vals[k] = v
			}
			out = append(out, Described{Entity: e.Entity, Values: vals})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Entity.key() < out[j].Entity.key() })
	return out, nil
}

func component(e Entity, typ string) (Component, bool) {
	for _, c := range e {
		if c.Type == typ {
			return c, true
		}
	}
	return Component{}, false
}

// Applied is the quota in force for a request: its bound and the sensor
// tags (the user and client id the rate is measured for; "" where the
// matching entity does not name that type).
type Applied struct {
	Bound          float64
	User, ClientID string
}

// Resolve returns the quota of key for user (the principal's name, without
// "User:") and clientID, by Kafka's precedence; ok false if none applies.
func (s *Store) Resolve(key, user, clientID string) (Applied, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(s.index) == 0 {
		return Applied{}, false
	}
	levels := [...]entKey{
		{hasUser: true, user: user, hasClient: true, client: clientID},
		{hasUser: true, user: user, hasClient: true, clientDefault: true},
		{hasUser: true, user: user},
		{hasUser: true, userDefault: true, hasClient: true, client: clientID},
		{hasUser: true, userDefault: true, hasClient: true, clientDefault: true},
		{hasUser: true, userDefault: true},
		{hasClient: true, client: clientID},
		{hasClient: true, clientDefault: true},
	}
	for _, l := range levels {
		vals, ok := s.index[l]
		if !ok {
			continue
		}
		if v, ok := vals[key]; ok {
			a := Applied{Bound: v}
			if l.hasUser {
				a.User = user
			}
			if l.hasClient {
				a.ClientID = clientID
			}
			return a, true
		}
	}
	return Applied{}, false
}
