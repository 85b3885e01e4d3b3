package nexmark

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weirhq/weir/stream"
)

// Options are what a query's topology depends on besides its topics.
type Options struct {
	// OutOfOrderness is the bound of the input's disorder: the App runs
	// with stream.Watermarks(OutOfOrderness, ...) (see AppOptions), so a
	// record is never more than this behind its partition's watermark.
	// Queries that keep state for a while derive its TTL from it.
	OutOfOrderness time.Duration
}

// Query declares one Nexmark query on b: it reads events (the JSON format
// of this package) from the topic in and writes its results to the topic
// out. It returns an error only for a declaration it cannot make; the
// stream library reports its own declaration errors from stream.NewApp.
type Query func(b *stream.Builder, in, out string, o Options) error

// queries is the registry Build looks names up in: one function per
// query, each in its own file (q0.go, q1.go, ...).
var queries = map[string]Query{
	"q0": q0,
	"q1": q1,
	"q2": q2,
	"q3": q3,
	"q4": q4,
	"q6": q6,

	"q5":  q5,
	"q7":  q7,
	"q8":  q8,
	"q11": q11,
}

// Queries returns the names of the queries Build knows, sorted.
func Queries() []string {
	names := make([]string, 0, len(queries))
	for n := range queries {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int {
		// q2 before q11: by length, then by text.
		if len(a) != len(b) {
			return len(a) - len(b)
		}
		return strings.Compare(a, b)
	})
	return names
}

// ErrUnknownQuery is returned by Build for a query name it does not know.
var ErrUnknownQuery = errors.New("nexmark: unknown query")

// Build declares the query named query ("q0", "q1", ...) on b, reading
// events from the topic in and writing results to out.
func Build(b *stream.Builder, query, in, out string, o Options) error {
	q, ok := queries[query]
	if !ok {
		return fmt.Errorf("%w %q (known: %s)", ErrUnknownQuery, query, strings.Join(Queries(), ", "))
	}
	if in == "" || out == "" {
		return fmt.Errorf("nexmark %s: input and output topics are required", query)
	}
	if in == out {
		return fmt.Errorf("nexmark %s: input and output are the same topic %q", query, in)
	}
	if o.OutOfOrderness < 0 {
		return fmt.Errorf("nexmark %s: negative out-of-orderness %v", query, o.OutOfOrderness)
	}
	return q(b, in, out, o)
}

// AppOptions are the stream options a query needs on top of the caller's
// (brokers, state directory, guarantee): the watermark of o.OutOfOrderness,
// with no idle timeout (a bounded run ends every input at the end of time
// anyway).
func AppOptions(o Options) []stream.Opt {
	return []stream.Opt{stream.Watermarks(o.OutOfOrderness, 0)}
}

// EnsureOutput creates the topic out with as many partitions as the topic
// in has, unless out exists. It fails if in does not exist.
func EnsureOutput(ctx context.Context, adm *kadm.Client, in, out string) error {
	details, err := adm.ListTopics(ctx, in)
	if err != nil {
		return fmt.Errorf("describe input topic %s: %w", in, err)
	}
	d, ok := details[in]
	if !ok || d.Err != nil {
		if ok && d.Err != nil {
			return fmt.Errorf("input topic %s: %w", in, d.Err)
		}
		return fmt.Errorf("input topic %s: %w", in, kerr.UnknownTopicOrPartition)
	}
	n := int32(len(d.Partitions))
	resp, err := adm.CreateTopic(ctx, n, -1, nil, out)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create output topic %s (%d partitions): %w", out, n, err)
	}
	return nil
}

// EventCodec is the stream codec of the input topic's values: Encode and
// Decode of this package (strict: a value that is not a Nexmark event is a
// FormatError, and the record goes to the dead-letter topic).
func EventCodec() stream.Codec[Event] { return eventCodec{want: allKinds} }

// eventCodec decodes the bodies of the events of the kinds in want only;
// the others are checked as strictly and decoded with only their Type.
type eventCodec struct{ want kinds }

func (eventCodec) Encode(e Event) ([]byte, error)   { return Encode(nil, e) }
func (c eventCodec) Decode(b []byte) (Event, error) { return decodeEvent(b, c.want, false) }

// events is the input topic as a stream of decoded events (the key is
// empty: no key). Given kinds, it holds only the events of those kinds:
// the others are still checked (a malformed one goes to the dead-letter
// topic, whatever the query) but not built, which saves most of their
// decoding.
func events(b *stream.Builder, in string, only ...EventType) stream.Stream[[]byte, Event] {
	if len(only) == 0 {
		return stream.From(b, in, stream.Bytes(), EventCodec())
	}
	return eventsOf(b, in, kindsOf(only...))
}

// eventNumbers is events of the given kinds with only their number fields
// set (every string empty, though checked): for a query that reads no
// string of them.
func eventNumbers(b *stream.Builder, in string, only ...EventType) stream.Stream[[]byte, Event] {
	return eventsOf(b, in, kindsOf(only...)|numbersOnly)
}

func eventsOf(b *stream.Builder, in string, want kinds) stream.Stream[[]byte, Event] {
	return stream.From(b, in, stream.Bytes(), stream.Codec[Event](eventCodec{want: want})).
		Filter(func(r stream.Record[[]byte, Event]) (bool, error) { return want.has(r.Value.Type), nil })
}
