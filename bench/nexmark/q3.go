package nexmark

import (
	"errors"

	"github.com/weirhq/weir/stream"
)

// q3 is being written (branch wt/nexq).
func q3(_ *stream.Builder, _, _ string, _ Options) error {
	return errors.New("nexmark q3: not implemented yet")
}
