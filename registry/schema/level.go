package schema

import (
	"fmt"
	"strings"
)

// Level is a compatibility level as the registry API names it.
type Level string

const (
	None               Level = "NONE"
	Backward           Level = "BACKWARD"
	BackwardTransitive Level = "BACKWARD_TRANSITIVE"
	Forward            Level = "FORWARD"
	ForwardTransitive  Level = "FORWARD_TRANSITIVE"
	Full               Level = "FULL"
	FullTransitive     Level = "FULL_TRANSITIVE"
)

// DefaultLevel is the registry's global level until configured.
const DefaultLevel = Backward

// ParseLevel reads a level (case is ignored).
func ParseLevel(s string) (Level, error) {
	l := Level(strings.ToUpper(s))
	switch l {
	case None, Backward, BackwardTransitive, Forward, ForwardTransitive, Full, FullTransitive:
		return l, nil
	}
	return "", fmt.Errorf("invalid compatibility level %q", s)
}

// CheckLevel reports why next may not follow previous (oldest first, the
// subject's live versions) at level l; no messages means it may.
//
//   - BACKWARD: next reads data written with the latest version.
//   - FORWARD: the latest version reads data written with next.
//   - FULL: both.
//   - *_TRANSITIVE: the same against every previous version, not only the
//     latest.
func CheckLevel(l Level, next Schema, previous []Schema) []string {
	if l == None || len(previous) == 0 {
		return nil
	}
	against := previous
	if !strings.HasSuffix(string(l), "_TRANSITIVE") {
		against = previous[len(previous)-1:]
	}
	base := Level(strings.TrimSuffix(string(l), "_TRANSITIVE"))
	var msgs []string
	for i := len(against) - 1; i >= 0; i-- {
		old := against[i]
		if base == Backward || base == Full {
			msgs = append(msgs, Check(next, old)...)
		}
		if base == Forward || base == Full {
			msgs = append(msgs, Check(old, next)...)
		}
		if n, ok := next.(*protoSchema); ok {
			if o, ok := old.(*protoSchema); ok {
				msgs = append(msgs, checkProtoHistory(n, o)...)
			}
		}
	}
	return msgs
}
