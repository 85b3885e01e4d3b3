//go:build !linux

package weirtest

import "os/exec"

// setDeathSignal does nothing where the kernel has no parent-death signal;
// t's cleanup still kills the child.
func setDeathSignal(*exec.Cmd) {}
