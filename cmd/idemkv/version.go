package main

import (
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"text/tabwriter"

	"github.com/idemkv/idemkv/cql/frame"
	"github.com/idemkv/idemkv/node"
)

func init() {
	register("version", "print idemkv's version and revision, its Go version and the Cassandra release it announces", runVersion)
}

// versionInfo is what idemkv version prints.
type versionInfo struct {
	Module, Version          string
	Revision, Time           string
	Modified                 bool
	Go, Platform             string
	Release                  string
	MinProtocol, MaxProtocol byte
}

func buildVersion() versionInfo {
	v := versionInfo{
		Module: "github.com/idemkv/idemkv", Version: "unknown",
		Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH,
		Release: node.ReleaseVersion, MinProtocol: frame.MinVersion, MaxProtocol: frame.MaxVersion,
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if bi.Main.Path != "" {
		v.Module = bi.Main.Path
	}
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	if bi.GoVersion != "" {
		v.Go = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

func runVersion(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		if args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
			fmt.Fprintln(stderr, "usage: idemkv version\n\nprints idemkv's module version and VCS revision, the Go version it was built\nwith, and the Cassandra release_version and native protocol versions it announces")
			return flag.ErrHelp
		}
		return fmt.Errorf("unexpected argument %q", args[0])
	}
	v := buildVersion()
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "idemkv\t%s %s\n", v.Module, v.Version)
	rev := "unknown (built without VCS information)"
	if v.Revision != "" {
		rev = v.Revision
		if v.Time != "" {
			rev += " (" + v.Time + ")"
		}
		if v.Modified {
			rev += ", with uncommitted changes"
		}
	}
	fmt.Fprintf(tw, "revision\t%s\n", rev)
	fmt.Fprintf(tw, "go\t%s %s\n", v.Go, v.Platform)
	fmt.Fprintf(tw, "cql\trelease_version %s, native protocol v%d to v%d\n", v.Release, v.MinProtocol, v.MaxProtocol)
	return tw.Flush()
}
