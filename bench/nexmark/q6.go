package nexmark

import (
	"errors"

	"github.com/weirhq/weir/stream"
)

// q6 is being written (branch wt/nexq).
func q6(_ *stream.Builder, _, _ string, _ Options) error {
	return errors.New("nexmark q6: not implemented yet")
}
