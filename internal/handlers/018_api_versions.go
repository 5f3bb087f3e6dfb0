package handlers

import (
	"context"
	"regexp"

	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// softwareNamePattern is KIP-511's rule for ClientSoftwareName and ClientSoftwareVersion.
var softwareNamePattern = regexp.MustCompile(`^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$`)

func (t *Table) apiVersions(_ context.Context, r *wire.Request) kmsg.Response {
	req := r.Body.(*kmsg.ApiVersionsRequest)
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	self := t.apis[18]
	if r.Version > self.max || r.Version < self.min {
		// The client is newer than us: answer in the one format every client can read, with
		// our own range so it retries at a version we know.
		resp.SetVersion(0)
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = 18, self.min, self.max
		resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{k}
		return resp
	}
	if r.Version >= 3 && (!softwareNamePattern.MatchString(req.ClientSoftwareName) || !softwareNamePattern.MatchString(req.ClientSoftwareVersion)) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	}
	resp.ApiKeys = t.Versions()
	// No finalized features: reporting any would make Java clients adopt our levels over the
	// data cluster's (they keep the map with the highest epoch).
	resp.FinalizedFeaturesEpoch = -1
	return resp
}
