package main

import (
	"github.com/coordinatord/coordinatord/internal/acl"
	"github.com/coordinatord/coordinatord/internal/config"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// newAuthorizer builds the ACL authorizer from authorizer.class.name and friends. Its metrics
// are registered whether or not it is enabled, so that the series exist in every deployment.
func newAuthorizer(cfg *config.Config, log *zap.Logger, reg prometheus.Registerer) (*acl.Authorizer, error) {
	var supers []acl.Principal
	for _, s := range cfg.Authorizer.SuperUsers {
		p, err := acl.ParsePrincipal(s)
		if err != nil {
			return nil, err
		}
		supers = append(supers, p)
	}
	return acl.New(acl.Config{
		Enabled: cfg.Authorizer.Enabled, SuperUsers: supers, AllowIfNoACL: cfg.Authorizer.AllowEveryoneIfNoACL,
		Logger: log.Named("authorizer"), Registerer: reg,
	}), nil
}
