package main

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"fmt"
	"strings"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/google/uuid"
)

// writeSBOM is a CycloneDX bill of materials of the release binary, read
// from the build information the Go linker put into it: the modules that
// were linked in, at the versions linked, not what go.mod lists. The
// serial number derives from the content and the time is the commit's, so
// one commit gives one SBOM.
func writeSBOM(binary, version string, created time.Time) ([]byte, error) {
	info, err := buildinfo.ReadFile(binary)
	if err != nil {
		return nil, fmt.Errorf("sbom: read the build information of %s: %w", binary, err)
	}
	// A purl's version is percent-encoded: the + of build metadata too.
	purl := func(path, v string) string { return "pkg:golang/" + path + "@" + strings.ReplaceAll(v, "+", "%2B") }
	app := cdx.Component{BOMRef: purl(info.Main.Path, "v"+version), Type: cdx.ComponentTypeApplication, Name: "snapflow", Version: version,
		PackageURL: purl(info.Main.Path, "v"+version), Licenses: &cdx.Licenses{{License: &cdx.License{ID: "Apache-2.0"}}},
		Properties: &[]cdx.Property{{Name: "go", Value: info.GoVersion}}}
	var comps []cdx.Component
	var refs []string
	for _, m := range info.Deps {
		if m.Replace != nil {
			m = m.Replace
		}
		c := cdx.Component{BOMRef: purl(m.Path, m.Version), Type: cdx.ComponentTypeLibrary, Name: m.Path, Version: m.Version, PackageURL: purl(m.Path, m.Version)}
		if m.Sum != "" {
			// The go.sum hash (h1:), which `go mod verify` checks.
			c.Properties = &[]cdx.Property{{Name: "go.sum", Value: m.Sum}}
		}
		comps = append(comps, c)
		refs = append(refs, c.BOMRef)
	}
	bom := cdx.NewBOM()
	bom.Metadata = &cdx.Metadata{Timestamp: created.UTC().Format(time.RFC3339), Component: &app}
	bom.Components = &comps
	bom.Dependencies = &[]cdx.Dependency{{Ref: app.BOMRef, Dependencies: &refs}}
	var body bytes.Buffer
	if err := cdx.NewBOMEncoder(&body, cdx.BOMFileFormatJSON).SetPretty(true).Encode(bom); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body.Bytes())
	bom.SerialNumber = "urn:uuid:" + uuid.NewSHA1(uuid.NameSpaceURL, sum[:]).String()
	var out bytes.Buffer
	if err := cdx.NewBOMEncoder(&out, cdx.BOMFileFormatJSON).SetPretty(true).Encode(bom); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
