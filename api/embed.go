// Package api holds the source-of-truth descriptions of Hutch's interfaces:
// the daemon's REST API (openapi.yaml, embedded here so the daemon can serve
// it) and the agent's protobuf services.
package api

import _ "embed"

// OpenAPI is the OpenAPI 3.1 document of the daemon's REST API v1.
//
//go:embed openapi.yaml
var OpenAPI []byte
