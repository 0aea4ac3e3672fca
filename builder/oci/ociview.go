package oci

import (
	"bytes"
	"encoding/json"
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// OCITyped shows a Docker-typed image (an engine export) with OCI media
// types, changing only descriptors: the config blob keeps its bytes, so its
// digest stays the engine's image id and `serve` finds the built image in
// the engine current instead of loading it again. (The builder's toOCI,
// for bases, may rewrite the config: our layers change it anyway.)
type OCITyped struct{ v1.Image }

var ociLayerType = map[types.MediaType]types.MediaType{
	types.DockerLayer:             types.OCILayer,
	types.OCILayer:                types.OCILayer,
	types.DockerUncompressedLayer: types.OCIUncompressedLayer,
	types.OCIUncompressedLayer:    types.OCIUncompressedLayer,
	types.OCILayerZStd:            types.OCILayerZStd,
}

func (o OCITyped) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }

func (o OCITyped) Manifest() (*v1.Manifest, error) {
	m, err := o.Image.Manifest()
	if err != nil {
		return nil, err
	}
	m = m.DeepCopy()
	m.MediaType = types.OCIManifestSchema1
	m.Config.MediaType = types.OCIConfigJSON
	for i := range m.Layers {
		mt, ok := ociLayerType[m.Layers[i].MediaType]
		if !ok {
			return nil, fmt.Errorf("layer %d has media type %s, which has no OCI equivalent", i, m.Layers[i].MediaType)
		}
		m.Layers[i].MediaType = mt
	}
	return m, nil
}

func (o OCITyped) RawManifest() ([]byte, error) {
	m, err := o.Manifest()
	if err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

func (o OCITyped) Digest() (v1.Hash, error) {
	raw, err := o.RawManifest()
	if err != nil {
		return v1.Hash{}, err
	}
	h, _, err := v1.SHA256(bytes.NewReader(raw))
	return h, err
}

func (o OCITyped) Size() (int64, error) {
	raw, err := o.RawManifest()
	return int64(len(raw)), err
}

func (o OCITyped) Layers() ([]v1.Layer, error) {
	ls, err := o.Image.Layers()
	if err != nil {
		return nil, err
	}
	out := make([]v1.Layer, len(ls))
	for i, l := range ls {
		out[i] = ociLayer{l}
	}
	return out, nil
}

func (o OCITyped) LayerByDigest(h v1.Hash) (v1.Layer, error) {
	l, err := o.Image.LayerByDigest(h)
	if err != nil {
		return nil, err
	}
	return ociLayer{l}, nil
}

// ociLayer reports a layer's OCI media type.
type ociLayer struct{ v1.Layer }

func (l ociLayer) MediaType() (types.MediaType, error) {
	mt, err := l.Layer.MediaType()
	if err != nil {
		return "", err
	}
	if o, ok := ociLayerType[mt]; ok {
		return o, nil
	}
	return mt, nil
}
