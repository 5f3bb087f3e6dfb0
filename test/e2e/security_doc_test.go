package e2e

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// docs/security.md's walkthrough, run as an operator would: certificates made with openssl, the
// configuration files the page shows, coordinatord started and stopped as the page does, SCRAM
// users with kafka-configs.sh, ACLs with kafka-acls.sh, a client allowed and denied, then a
// gateway in front of a reference broker with SASL_SSL/SCRAM and StandardAuthorizer. Every
// command of every sh block runs in order in one empty directory, each checked by its
// `# expect:` text (`# expect error:`: the error the command reports, whatever its exit
// status). The page's ports are moved to free ones and kafka-1.example.com to the SASL
// broker's listeners; kafka-admin.properties (the cluster
// administrator's own client configuration, which the page leaves to the reader) is this
// broker's: its PLAINTEXT listener, where User:ANONYMOUS is a super user.
func TestSecurityDocRunsAsWritten(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(root, "docs/security.md")
	blocks := docCommandBlocks(t, page)
	files := docFiles(t, page)
	for _, name := range []string{"coordinatord.properties", "admin.properties", "alice.properties", "gateway.properties"} {
		if files[name] == "" {
			t.Fatalf("docs/security.md has no properties block for %s (has %v)", name, files)
		}
	}

	kafkaAdmin, kafkaSASL, kafkaCA := startSASLKafka(t)
	base := freePortRange(t, 16)
	port := func(i int) string { return strconv.Itoa(base + i) }
	subst := strings.NewReplacer(
		"127.0.0.1:9092", "127.0.0.1:"+port(0),
		"127.0.0.1:9094", "127.0.0.1:"+port(1),
		"127.0.0.1:9644", "127.0.0.1:"+port(2),
		"127.0.0.1:9095", "127.0.0.1:"+port(3),
		"127.0.0.1:9645", "127.0.0.1:"+port(4),
		"9100-9109", port(5)+"-"+port(14),
		"kafka-1.example.com:9092", kafkaAdmin,
		"kafka-1.example.com:9093", kafkaSASL,
	)

	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range files {
		write(name, subst.Replace(content))
	}
	write("kafka-admin.properties", "security.protocol=PLAINTEXT\n")
	ca, err := os.ReadFile(kafkaCA)
	if err != nil {
		t.Fatal(err)
	}
	write("kafka-ca.pem", string(ca))

	// coordinatord on the PATH is the binary under test.
	bin := kafkaBin(t)
	if err := os.Symlink(binaryPath, filepath.Join(bin, "coordinatord")); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "GORACE=halt_on_error=1")
	// The page starts coordinatord in the background and stops it itself; should a command fail
	// in between, the daemons it started are stopped here, by the pids the page wrote.
	t.Cleanup(func() {
		for _, f := range []string{"coordinatord.pid", "gateway.pid"} {
			if b, err := os.ReadFile(filepath.Join(dir, f)); err == nil {
				if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		if t.Failed() {
			for _, f := range []string{"coordinatord.log", "gateway.log"} {
				if b, err := os.ReadFile(filepath.Join(dir, f)); err == nil {
					t.Logf("%s:\n%s", f, tail(b, 4000))
				}
			}
		}
	})

	n := 0
	for _, block := range blocks {
		for _, c := range block {
			n++
			line := subst.Replace(c.line)
			var out []byte
			var err error
			// A daemon just started takes a moment to answer: an operator would run the
			// command again, and so does the test (a command that did what it should is not).
			for attempt := 0; attempt < 10; attempt++ {
				cmd := exec.Command("bash", "-o", "pipefail", "-c", line)
				cmd.Dir, cmd.Env = dir, env
				out, err = cmd.CombinedOutput()
				// Kafka's tools do not all exit non-zero after printing an error (the consumer
				// group tool's describe does not), so an expected error is told by its text.
				if (err == nil || c.fails) && containsFields(string(out), c.expect) {
					break
				}
				time.Sleep(2 * time.Second)
			}
			switch {
			case !c.fails && err != nil:
				t.Fatalf("%s: %v\n%s", c.line, err, tail(out, 4000))
			case !containsFields(string(out), c.expect):
				t.Fatalf("%s: output lacks %q:\n%s", c.line, c.expect, tail(out, 4000))
			}
		}
	}
	if n < 20 {
		t.Fatalf("docs/security.md's walkthrough has %d commands; the test expects the whole walkthrough", n)
	}

	// The group alice consumed in through the gateway lives in coordinatord, not upstream: the
	// upstream broker has never heard of it.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(kafkaAdmin))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	groups, err := kadm.NewClient(cl).ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := groups["app-orders"]; ok {
		t.Fatalf("the upstream broker holds the group app-orders: %v", groups.Groups())
	}
}

// docFiles returns the blocks of a page fenced as ```properties <file name>, by file name: the
// files the page asks the reader to write.
func docFiles(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files := map[string]string{}
	name := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "```properties "):
			name = strings.TrimSpace(strings.TrimPrefix(line, "```properties "))
		case line == "```":
			name = ""
		case name != "":
			files[name] += line + "\n"
		}
	}
	return files
}
