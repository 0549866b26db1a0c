module github.com/troupe-rl/troupe

go 1.26.5

require (
	github.com/gomlx/gomlx v0.28.1 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
