package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func init() {
	register(&command{
		name:    "version",
		summary: "print troupe's version and build information",
		run: func(ctx context.Context, env *cliEnv, args []string) error {
			c := commands["version"]
			if _, err := parseFlags(env, c, newFlags(env, c), args); err != nil {
				return err
			}
			rev := ""
			if bi, ok := debug.ReadBuildInfo(); ok {
				for _, s := range bi.Settings {
					if s.Key == "vcs.revision" {
						rev = " " + s.Value
					}
				}
			}
			fmt.Fprintf(env.stdout, "troupe %s%s (%s, %s/%s)\n", version, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	})
}
