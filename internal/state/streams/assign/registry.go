package assign

// The built-in assignors by name (spec §6.2): `sticky` (Kafka 4.4's, the default) and
// `highavailability` (warm-up tasks, §6.7).

// DefaultName is the assignor a group uses when it selects none or an unregistered one.
const DefaultName = StickyName

var registry = []Assignor{Sticky{}, HighAvailability{}}

// Lookup returns the built-in assignor registered under name.
func Lookup(name string) (Assignor, bool) {
	for _, a := range registry {
		if a.Name() == name {
			return a, true
		}
	}
	return nil, false
}

// Names lists the registered assignor names, the default first.
func Names() []string {
	names := make([]string, len(registry))
	for i, a := range registry {
		names[i] = a.Name()
	}
	return names
}

// Default returns the default assignor.
func Default() Assignor {
	a, _ := Lookup(DefaultName)
	return a
}
