package e2e

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// docs/migration.md, run as an operator would during a real migration: its three command blocks
// (before the upgrade, after the first streams-protocol instance joined, after the rollback) run
// in order at those points of a word-count application's online upgrade and downgrade, each line
// checked by its `# expect:` text. Kafka's bin/ scripts are stood in for by scripts of the same
// names that run the same tool classes of Kafka 4.4; the page's addresses and application id are
// moved to the test's.
func TestGateway_MigrationDocRunsAsWritten(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	blocks := docCommandBlocks(t, filepath.Join(root, "docs/migration.md"))
	if len(blocks) != 3 {
		t.Fatalf("docs/migration.md should have 3 command blocks (before the upgrade, after it, after the rollback), has %d: %v", len(blocks), blocks)
	}
	env := append(os.Environ(), "PATH="+kafkaBin(t)+string(os.PathListSeparator)+os.Getenv("PATH"))

	g := startGateway(t, "group.initial.rebalance.delay.ms=0", "group.streams.initial.rebalance.delay.ms=0", "group.streams.assignment.interval.ms=0")
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	r := newWordCountRun(t, ctx, g.Addr)
	appID := regexp.MustCompile(`\bwordcount\b`)
	runBlock := func(block []quickstartCommand) {
		t.Helper()
		for _, c := range block {
			line := strings.NewReplacer("localhost:9092", g.Addr, "localhost:9644", g.Admin).Replace(c.line)
			line = appID.ReplaceAllString(line, r.appID)
			expect := appID.ReplaceAllString(c.expect, r.appID)
			var out []byte
			var err error
			// A rebalance takes a heartbeat or two to show in the tools' answers: an operator
			// would run the command again, and so does the test.
			for attempt := 0; attempt < 10; attempt++ {
				cmd := exec.Command("bash", "-o", "pipefail", "-c", line)
				cmd.Dir, cmd.Env = root, env
				out, err = cmd.CombinedOutput()
				if err == nil && containsFields(string(out), expect) {
					break
				}
				time.Sleep(2 * time.Second)
			}
			if err != nil {
				t.Fatalf("%s: %v\n%s", c.line, err, tail(out, 4000))
			}
			if !containsFields(string(out), expect) {
				t.Fatalf("%s: output lacks %q:\n%s", c.line, expect, tail(out, 4000))
			}
		}
	}
	start := func(name, protocol string) *streamsApp {
		a := startWordCount(t, name, g.Addr, r.appID, r.in, r.out, protocol)
		a.waitState("RUNNING", 90*time.Second)
		return a
	}

	c1 := start("classic-1", "classic")
	r.produce(t, ctx, 1)
	waitCountsAtLeast(t, ctx, g.Addr, r.out, r.expected)
	runBlock(blocks[0])

	s1 := start("streams-1", "streams")
	waitStreamsMembers(t, ctx, r.cl, r.appID, 2, 1)
	runBlock(blocks[1])

	s1.stop() // the only streams-protocol member leaves: the group turns back into a classic group
	r.produce(t, ctx, 2)
	waitCountsAtLeast(t, ctx, g.Addr, r.out, r.expected)
	runBlock(blocks[2])
	c1.stop()
	checkNoTaskProcessedTwice(t, c1, s1)
}

// docCommandBlocks returns the commands of each sh block of a page, block by block.
func docCommandBlocks(t *testing.T, path string) [][]quickstartCommand {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var blocks [][]quickstartCommand
	inBlock := false
	// A line ending in a backslash goes on with the next, as in a shell.
	pending := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "```sh":
			inBlock = true
			blocks = append(blocks, nil)
		case line == "```":
			inBlock = false
		case inBlock && strings.HasSuffix(line, "\\"):
			pending += strings.TrimSuffix(line, "\\")
		case inBlock && (line != "" || pending != ""):
			line, pending = pending+line, ""
			c := quickstartCommand{}
			cmd, expect, _ := strings.Cut(line, "# expect:")
			if cmdErr, expectErr, ok := strings.Cut(line, "# expect error:"); ok {
				cmd, expect, c.fails = cmdErr, expectErr, true
			}
			c.line, c.expect = strings.TrimSpace(cmd), strings.TrimSpace(expect)
			blocks[len(blocks)-1] = append(blocks[len(blocks)-1], c)
		}
	}
	return blocks
}

// kafkaBin returns a directory of scripts named as Kafka 4.4's bin/ tools that run the same
// tool classes, for pages whose commands call them by name.
func kafkaBin(t *testing.T) string {
	t.Helper()
	cp := wordCountClasspath(t)
	bin := t.TempDir()
	for name, class := range map[string]string{
		"kafka-acls.sh":             "org.apache.kafka.tools.AclCommand",
		"kafka-configs.sh":          "org.apache.kafka.tools.ConfigCommand",
		"kafka-console-consumer.sh": "org.apache.kafka.tools.consumer.ConsoleConsumer",
		"kafka-console-producer.sh": "org.apache.kafka.tools.ConsoleProducer",
		"kafka-groups.sh":           "org.apache.kafka.tools.GroupsCommand",
		"kafka-streams-groups.sh":   "org.apache.kafka.tools.streams.StreamsGroupCommand",
		"kafka-consumer-groups.sh":  consumerGroupCommand,
		"kafka-topics.sh":           "org.apache.kafka.tools.TopicCommand",
	} {
		script := "#!/bin/sh\nexec java -Xmx256m -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -cp '" + cp + "' " + class + " \"$@\"\n"
		if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return bin
}
