module github.com/agentsurface/agentsurface

go 1.26

require (
	github.com/google/jsonschema-go v0.4.3
	go.uber.org/goleak v1.3.0
	pgregory.net/rapid v1.3.0
)
