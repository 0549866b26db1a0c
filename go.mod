module github.com/troupe-rl/troupe

go 1.26

require (
	github.com/sourcegraph/conc v0.3.0 // indirect
	golang.org/x/sys v0.43.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
