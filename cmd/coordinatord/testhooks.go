//go:build !coordinatord_testhooks

package main

import "net/http"

// registerTestHooks adds nothing: the hooks exist only in binaries built with the
// coordinatord_testhooks tag (test/integration builds one), never in a release.
func registerTestHooks(*http.ServeMux, *state) {}
