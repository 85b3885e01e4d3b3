package weirtest

import (
	"os/exec"
	"syscall"
)

// setDeathSignal makes the kernel kill the child when the thread that
// started it (and so the test process) dies, so that no child outlives a
// crashed or killed test run.
func setDeathSignal(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
