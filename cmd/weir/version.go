package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
)

// buildInfo describes this binary: the module version ("(devel)" for a
// build from a checkout), the VCS revision when the build recorded one,
// and the Go toolchain.
type buildInfo struct {
	version, revision, goVersion string
	modified                     bool
}

func readBuildInfo() buildInfo {
	bi := buildInfo{version: "(devel)", goVersion: runtime.Version()}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return bi
	}
	if v := info.Main.Version; v != "" {
		bi.version = v
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			bi.revision = s.Value
		case "vcs.modified":
			bi.modified = s.Value == "true"
		}
	}
	return bi
}

func (bi buildInfo) String() string {
	s := "weir " + bi.version
	if bi.revision != "" {
		rev := bi.revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		s += " " + rev
		if bi.modified {
			s += "+dirty"
		}
	}
	return fmt.Sprintf("%s (%s, %s/%s)", s, bi.goVersion, runtime.GOOS, runtime.GOARCH)
}

// collector exports weir_build_info{version,revision,goversion} = 1.
func (bi buildInfo) collector() prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "weir_build_info",
		Help:        "Always 1; the labels describe the running weir binary.",
		ConstLabels: prometheus.Labels{"version": bi.version, "revision": bi.revision, "goversion": bi.goVersion},
	})
	g.Set(1)
	return g
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of this weir binary",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), readBuildInfo())
			return err
		},
	}
}
