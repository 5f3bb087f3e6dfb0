package plugin

import (
	"bufio"
	"os"
	"strings"
	"testing"
)

// The example configurations in configs/ are accepted by the plugins they configure.
func TestExampleConfigsBuild(t *testing.T) {
	for _, name := range []string{"memory", "file", "http"} {
		f, err := os.Open("../../configs/plugin-" + name + ".properties")
		if err != nil {
			t.Fatal(err)
		}
		class, props := "", map[string]string{}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			k, v, ok := strings.Cut(line, "=")
			if line == "" || line[0] == '#' || !ok {
				continue
			}
			rest, ok := strings.CutPrefix(k, KeyPrefix)
			switch {
			case !ok:
				t.Errorf("%s: key %s is not a plugin key", name, k)
			case rest == "class":
				class = v
			case strings.HasPrefix(rest, name+"."):
				props[rest] = v
			}
		}
		f.Close()
		if name == "file" {
			props["file.dir"] = t.TempDir()
		}
		p, got, err := NewRegistry().Build(class, props)
		if err != nil || got != name {
			t.Fatalf("%s: %v", name, err)
		}
		p.Close()
	}
}
