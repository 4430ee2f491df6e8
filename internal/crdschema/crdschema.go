// Package crdschema applies snapflow's CRD schemas to objects offline: the
// same defaulting and pruning the API server performs before admission, so
// `snapflow validate` sees what the webhook would see.
package crdschema

import (
	"fmt"
	"io/fs"
	"sync"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/snapflow/snapflow/config/crd"
)

var (
	once       sync.Once
	schemas    map[string]*structuralschema.Structural
	validators map[string]validation.SchemaValidator
	loadErr    error
)

func load() {
	schemas = map[string]*structuralschema.Structural{}
	validators = map[string]validation.SchemaValidator{}
	files, err := fs.Glob(crd.Bases, "bases/*.yaml")
	if err != nil {
		loadErr = err
		return
	}
	for _, f := range files {
		b, err := fs.ReadFile(crd.Bases, f)
		if err != nil {
			loadErr = err
			return
		}
		var c apiextv1.CustomResourceDefinition
		if err := yaml.Unmarshal(b, &c); err != nil {
			loadErr = fmt.Errorf("%s: %w", f, err)
			return
		}
		var internal apiextensions.JSONSchemaProps
		if err := apiextv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(c.Spec.Versions[0].Schema.OpenAPIV3Schema, &internal, nil); err != nil {
			loadErr = fmt.Errorf("%s: %w", f, err)
			return
		}
		s, err := structuralschema.NewStructural(&internal)
		if err != nil {
			loadErr = fmt.Errorf("%s: %w", f, err)
			return
		}
		schemas[c.Spec.Names.Kind] = s
		v, _, err := validation.NewSchemaValidator(&internal)
		if err != nil {
			loadErr = fmt.Errorf("%s: %w", f, err)
			return
		}
		validators[c.Spec.Names.Kind] = v
	}
}

func schemaFor(kind string) (*structuralschema.Structural, error) {
	once.Do(load)
	if loadErr != nil {
		return nil, loadErr
	}
	s, ok := schemas[kind]
	if !ok {
		return nil, fmt.Errorf("no CRD for kind %q", kind)
	}
	return s, nil
}

// Apply prunes fields the schema does not know (returning their paths, which
// the API server would refuse under strict field validation) and applies the
// schema defaults, in place.
func Apply(kind string, obj map[string]any) ([]string, error) {
	s, err := schemaFor(kind)
	if err != nil {
		return nil, err
	}
	unknown := pruning.PruneWithOptions(obj, s, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	defaulting.Default(obj, s)
	return unknown, nil
}

// Validate checks obj (already pruned and defaulted by Apply) against the
// schema's value rules, as the API server does before admission: types,
// enums, patterns, lengths and item counts. CEL rules are not evaluated.
func Validate(kind string, obj map[string]any) (field.ErrorList, error) {
	if _, err := schemaFor(kind); err != nil {
		return nil, err
	}
	return validation.ValidateCustomResource(nil, obj, validators[kind]), nil
}
