package nexmark

import (
	"errors"

	"github.com/weirhq/weir/stream"
)

// q4 is being written (branch wt/nexq).
func q4(_ *stream.Builder, _, _ string, _ Options) error {
	return errors.New("nexmark q4: not implemented yet")
}
