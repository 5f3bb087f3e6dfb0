package e2e

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// docs/quickstart.md, run as a user would: every command of its sh blocks, in order, from the
// repository root, each checked by the `# expect:` text its line names. The ports are moved to
// free ones (the page documents the variables) so the run cannot collide with anything else.
func TestQuickstartDocRunsAsWritten(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmds := quickstartCommands(t, filepath.Join(root, "docs/quickstart.md"))
	if len(cmds) < 5 || cmds[0].line != "make demo" || cmds[len(cmds)-1].line != "make demo-stop" {
		t.Fatalf("docs/quickstart.md should start with make demo and end with make demo-stop: %v", cmds)
	}
	base := freePortRange(t, 9)
	admin := strconv.Itoa(base + 1)
	env := append(os.Environ(),
		"DEMO_DIR="+t.TempDir(),
		"DEMO_PORT="+strconv.Itoa(base),
		"DEMO_ADMIN_PORT="+admin,
		"DEMO_BROKER_PORTS="+strconv.Itoa(base+2)+"-"+strconv.Itoa(base+7),
		"DEMO_KAFKA_PORT="+strconv.Itoa(base+8),
	)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			stop := exec.Command("deploy/demo/demo.sh", "stop")
			stop.Dir, stop.Env = root, env
			stop.Run()
		}
	})
	for _, c := range cmds {
		line := strings.ReplaceAll(c.line, "127.0.0.1:9644", "127.0.0.1:"+admin)
		var out []byte
		var err error
		// The counts and the describe of a freshly started application take a commit interval
		// or a heartbeat to show: a user would run the command again, and so does the test.
		for attempt := 0; attempt < 6; attempt++ {
			cmd := exec.Command("bash", "-o", "pipefail", "-c", line)
			cmd.Dir, cmd.Env = root, env
			out, err = cmd.CombinedOutput()
			if err == nil && containsFields(string(out), c.expect) {
				break
			}
			time.Sleep(2 * time.Second)
		}
		if err != nil {
			t.Fatalf("%s: %v\n%s", c.line, err, tail(out, 4000))
		}
		if !containsFields(string(out), c.expect) {
			t.Fatalf("%s: output lacks %q:\n%s", c.line, c.expect, tail(out, 4000))
		}
		stopped = stopped || c.line == "make demo-stop"
	}
}

// quickstartCommand is one command of a page and the text its output must have; fails says the
// text is an error the command reports (`# expect error:`), so its exit status is not checked.
type quickstartCommand struct {
	line, expect string
	fails        bool
}

func quickstartCommands(t *testing.T, path string) []quickstartCommand {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cmds []quickstartCommand
	inBlock := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "```sh":
			inBlock = true
		case line == "```":
			inBlock = false
		case inBlock && line != "":
			cmd, expect, _ := strings.Cut(line, "# expect:")
			cmds = append(cmds, quickstartCommand{line: strings.TrimSpace(cmd), expect: strings.TrimSpace(expect)})
		}
	}
	return cmds
}

// containsFields reports whether out has a line holding want's whitespace-separated words in
// order, so that a tool's column padding does not matter.
func containsFields(out, want string) bool {
	if want == "" {
		return true
	}
	w := strings.Fields(want)
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(strings.Join(strings.Fields(line), " "), strings.Join(w, " ")) {
			return true
		}
	}
	return false
}
