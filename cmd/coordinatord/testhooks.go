//go:build !testhooks

package main

import "net/http"

// registerTestHooks adds nothing: the hooks exist only in binaries built with the
// testhooks tag (test/integration builds one), never in a release.
func registerTestHooks(*http.ServeMux, *state) {}
