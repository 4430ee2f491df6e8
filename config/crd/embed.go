// Package crd holds snapflow's generated CustomResourceDefinitions; the
// embedded copy lets offline tools apply the same schema defaults and
// pruning the API server does.
package crd

import "embed"

// Bases holds config/crd/bases/*.yaml.
//
//go:embed bases/*.yaml
var Bases embed.FS
