package stream

import (
	"context"
	"errors"
	"fmt"
)

// Error policy
//
// A record whose processing fails is retried only when the error is worth
// retrying: by default (IsRetriable) an error marked with Retriable, or one
// that says it is temporary or a timeout (net.Error and the like), or a
// context deadline. Every other error — a bad record, a failed validation, a
// panic — would fail again on the same input, so the record goes to the
// dead-letter topic at once and the partition goes on: a deterministic
// failure costs one attempt, never a backoff. Permanent marks an error as
// not worth retrying whatever the policy says.
//
// A retried record is tried again in place (up to MaxAttempts, sleeping
// RetryBackoff between attempts) before the records after it, because a
// partition's records are processed in order: a retriable failure holds its
// partition up for the backoff; nothing else does.
//
// The App's policy (MaxAttempts, RetryIf) applies to every operator; an
// operator given a Retry option uses that instead.

// Permanent marks err as not worth retrying: the record goes to the
// dead-letter topic at once. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &classified{err: err, retriable: false}
}

// Retriable marks err as worth retrying (a dependency timed out or is
// unavailable): the record is tried again, up to MaxAttempts, with backoff.
// Retriable(nil) is nil.
func Retriable(err error) error {
	if err == nil {
		return nil
	}
	return &classified{err: err, retriable: true}
}

type classified struct {
	err       error
	retriable bool
}

func (e *classified) Error() string { return e.err.Error() }
func (e *classified) Unwrap() error { return e.err }

// IsRetriable is the default RetryIf: true for an error marked Retriable,
// one with a Temporary() or Timeout() method returning true, or a context
// deadline; false for everything else (including Permanent errors, decode
// errors and panics).
func IsRetriable(err error) bool {
	var c *classified
	if errors.As(err, &c) {
		return c.retriable
	}
	var tmp interface{ Temporary() bool }
	if errors.As(err, &tmp) && tmp.Temporary() {
		return true
	}
	var to interface{ Timeout() bool }
	if errors.As(err, &to) && to.Timeout() {
		return true
	}
	return errors.Is(err, context.DeadlineExceeded)
}

// isPermanent reports whether err is marked Permanent (or cannot succeed on
// a retry: a decode error, a panic).
func isPermanent(err error) bool {
	var c *classified
	if errors.As(err, &c) && !c.retriable {
		return true
	}
	var de *DecodeError
	var pe *PanicError
	return errors.As(err, &de) || errors.As(err, &pe)
}

// RetryIf sets which processing errors are worth retrying (default:
// IsRetriable). Errors marked Permanent, decode errors and panics are never
// retried. For instance RetryIf(func(error) bool { return true }) retries
// every other error, as weir did before error policies.
func RetryIf(fn func(error) bool) Opt { return optFunc(func(c *config) { c.errors.retryIf = fn }) }

// DLQPerTopic sends a failed record to "<its input topic>.dlq" instead of
// the App's one dead-letter topic "<app>.dlq".
func DLQPerTopic() Opt { return optFunc(func(c *config) { c.errors.perTopicDLQ = true }) }

// errorConfig is the App's error policy; its zero value is the default.
type errorConfig struct {
	retryIf     func(error) bool // nil: IsRetriable
	perTopicDLQ bool
}

// OpOpt configures one operator (Map, FlatMap, KeyBy, Filter, FilterNot,
// Peek): its name (Named) or its error policy (Retry).
type OpOpt interface{ applyOp(*node) }

type named string

func (n named) applyOp(nd *node) { nd.name = string(n) }

// Named names an operator: the name appears in App.Describe and, for a
// record that fails in it, in the dead-letter header HeaderDLQOperator.
// Default: the operator's kind and its node number ("map-3").
func Named(name string) OpOpt { return named(name) }

// Retry is an operator's error policy, replacing the App's for the errors
// of that operator.
type Retry struct {
	// Attempts is how many times a record failing with a retriable error
	// is tried in all (>= 1; 1: never retried). 0: the App's MaxAttempts.
	Attempts int
	// If says which errors are worth retrying. nil: the App's RetryIf.
	If func(error) bool
}

func (r Retry) applyOp(nd *node) { nd.retry = &r }

// opError is the error of a record that failed in operator nd.
type opError struct {
	nd  *node
	err error
}

func (e *opError) Error() string { return e.nd.name + ": " + e.err.Error() }
func (e *opError) Unwrap() error { return e.err }

// failedIn wraps err with the operator it failed in, unless an operator
// downstream did already (the innermost operator is the one that failed).
func failedIn(nd *node, err error) error {
	if err == nil {
		// Before oe: errors.As makes it escape, and an escaping variable
		// is allocated where it is declared, on every call.
		return nil
	}
	var oe *opError
	if errors.As(err, &oe) {
		return err
	}
	var fe *fatalError
	if errors.As(err, &fe) {
		return err
	}
	return &opError{nd: nd, err: err}
}

// operatorOf returns the name of the operator err failed in ("" if none
// says).
func operatorOf(err error) string {
	var oe *opError
	if errors.As(err, &oe) {
		return oe.nd.name
	}
	return ""
}

// retryable decides whether a record that failed with err on its attempt-th
// attempt is tried again.
func (a *App) retryable(err error, attempt int) bool {
	if isPermanent(err) {
		return false
	}
	max, retryIf := a.cfg.maxAttempts, a.cfg.errors.retryIf
	var oe *opError
	if errors.As(err, &oe) && oe.nd.retry != nil {
		if oe.nd.retry.Attempts > 0 {
			max = oe.nd.retry.Attempts
		}
		if oe.nd.retry.If != nil {
			retryIf = oe.nd.retry.If
		}
	}
	if retryIf == nil {
		retryIf = IsRetriable
	}
	return attempt < max && retryIf(err)
}

// validateOps checks the operators' options.
func (b *Builder) validateOp(nd *node) {
	if nd.retry != nil && nd.retry.Attempts < 0 {
		b.addErr(fmt.Errorf("operator %s: retry attempts %d < 0", nd.name, nd.retry.Attempts))
	}
}
