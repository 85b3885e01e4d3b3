package errorfs

import (
	"path/filepath"
	"strings"
	"sync/atomic"
)

// Predicate selects operations.
type Predicate func(op Op) bool

// OnOps selects operations of the given kinds (any kind if none are given).
func OnOps(kinds ...OpKind) Predicate {
	return func(op Op) bool {
		if len(kinds) == 0 {
			return true
		}
		for _, k := range kinds {
			if op.Kind == k {
				return true
			}
		}
		return false
	}
}

// PathMatch selects operations whose Path or NewPath matches the
// filepath.Match pattern. A pattern without a separator is matched against
// the base name ("*.log" selects every segment file in any directory); one
// with a separator against the whole path. PathMatch panics if the pattern
// is malformed, like regexp.MustCompile: it is a programming error.
func PathMatch(pattern string) Predicate {
	if _, err := filepath.Match(pattern, ""); err != nil {
		panic("errorfs: bad pattern " + pattern + ": " + err.Error())
	}
	base := !strings.ContainsRune(pattern, filepath.Separator)
	match := func(p string) bool {
		if p == "" {
			return false
		}
		if base {
			p = filepath.Base(p)
		}
		ok, _ := filepath.Match(pattern, p)
		return ok
	}
	return func(op Op) bool { return match(op.Path) || match(op.NewPath) }
}

// PathContains selects operations whose Path or NewPath contains s.
func PathContains(s string) Predicate {
	return func(op Op) bool {
		return strings.Contains(op.Path, s) || op.NewPath != "" && strings.Contains(op.NewPath, s)
	}
}

// And selects operations selected by every one of ps.
func And(ps ...Predicate) Predicate {
	return func(op Op) bool {
		for _, p := range ps {
			if !p(op) {
				return false
			}
		}
		return true
	}
}

// Or selects operations selected by any of ps.
func Or(ps ...Predicate) Predicate {
	return func(op Op) bool {
		for _, p := range ps {
			if p(op) {
				return true
			}
		}
		return false
	}
}

// FailIf fails every operation p selects with err.
func FailIf(p Predicate, err error) Injector {
	return InjectorFunc(func(op Op) error {
		if p(op) {
			return err
		}
		return nil
	})
}

// FailAfter lets the first n operations p selects succeed and fails every
// later one with err: "the disk fills up after n writes".
func FailAfter(n int64, p Predicate, err error) Injector {
	var seen atomic.Int64
	return InjectorFunc(func(op Op) error {
		if p(op) && seen.Add(1) > n {
			return err
		}
		return nil
	})
}

// Times passes on at most n of inj's errors, then none: "the next sync
// fails once".
func Times(n int64, inj Injector) Injector {
	var left atomic.Int64
	left.Store(n)
	return InjectorFunc(func(op Op) error {
		if left.Load() <= 0 {
			return nil
		}
		err := inj.MaybeError(op)
		if err != nil && left.Add(-1) < 0 {
			return nil // another goroutine used the last one
		}
		return err
	})
}

// Toggle passes on its Injector's errors only while on, so a test can
// simulate "disk full, then space returns". A new Toggle is off. It counts
// the errors it injected.
type Toggle struct {
	inj      Injector
	on       atomic.Bool
	injected atomic.Int64
}

// NewToggle returns an off Toggle around inj.
func NewToggle(inj Injector) *Toggle { return &Toggle{inj: inj} }

// On starts injecting.
func (t *Toggle) On() { t.on.Store(true) }

// Off stops injecting.
func (t *Toggle) Off() { t.on.Store(false) }

// Injected returns how many errors t has injected.
func (t *Toggle) Injected() int64 { return t.injected.Load() }

// MaybeError implements Injector.
func (t *Toggle) MaybeError(op Op) error {
	if !t.on.Load() {
		return nil
	}
	err := t.inj.MaybeError(op)
	if err != nil {
		t.injected.Add(1)
	}
	return err
}

// First consults injs in order and returns the first error one returns;
// the ones after it are not consulted for that operation.
func First(injs ...Injector) Injector {
	return InjectorFunc(func(op Op) error {
		for _, inj := range injs {
			if err := inj.MaybeError(op); err != nil {
				return err
			}
		}
		return nil
	})
}
