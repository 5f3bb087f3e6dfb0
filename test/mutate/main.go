// Command mutate runs a hand-written mutation sweep: each mutant replaces one exact, unique
// piece of source text, the named package's tests run against it, and the source is restored
// before the next. It answers which decisions the tests would let break unnoticed
// (docs/developing.md, "Mutation sweeps").
//
//	go run ./test/mutate -list test/mutate/streams.json [-run REGEX] [ID...]
//
// The list is JSON: {"package": "./internal/...", "mutants": [{"id", "file", "old", "new",
// "why"}]}. Each result line is "ID killed|survived|buildfail|badmatch [first failing test]".
// Run it under nice -n 19 on a shared machine; it restores every file it touched even when
// interrupted.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"time"
)

type mutant struct {
	ID   string `json:"id"`
	File string `json:"file"`
	Old  string `json:"old"`
	New  string `json:"new"`
	Why  string `json:"why"`
}

type list struct {
	Package string   `json:"package"`
	Mutants []mutant `json:"mutants"`
}

func main() {
	listPath := flag.String("list", "test/mutate/streams.json", "mutant list (JSON)")
	run := flag.String("run", "", "go test -run regex (default: every test of the package)")
	timeout := flag.Duration("timeout", 5*time.Minute, "per-mutant go test -timeout (a mutant that loops is killed by it)")
	flag.Parse()
	raw, err := os.ReadFile(*listPath)
	if err != nil {
		fail(err)
	}
	var l list
	if err := json.Unmarshal(raw, &l); err != nil {
		fail(fmt.Errorf("%s: %w", *listPath, err))
	}
	only := map[string]bool{}
	for _, id := range flag.Args() {
		only[id] = true
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	killed, total := 0, 0
	for _, m := range l.Mutants {
		if len(only) > 0 && !only[m.ID] {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		res, detail := try(ctx, l.Package, m, *run, *timeout)
		fmt.Println(strings.TrimSpace(m.ID + " " + res + " " + detail))
		if res != "badmatch" && res != "buildfail" {
			total++
			if res == "killed" {
				killed++
			}
		}
	}
	fmt.Printf("killed %d of %d\n", killed, total)
}

func try(ctx context.Context, pkg string, m mutant, run string, timeout time.Duration) (string, string) {
	src, err := os.ReadFile(m.File)
	if err != nil {
		fail(err)
	}
	if n := bytes.Count(src, []byte(m.Old)); n != 1 {
		return "badmatch", fmt.Sprintf("(%d matches)", n)
	}
	if err := os.WriteFile(m.File, bytes.Replace(src, []byte(m.Old), []byte(m.New), 1), 0o644); err != nil {
		fail(err)
	}
	defer func() {
		if err := os.WriteFile(m.File, src, 0o644); err != nil {
			fail(fmt.Errorf("restoring %s: %w", m.File, err))
		}
	}()
	// go test's own timeout ends a test binary that a mutant sent into a loop (killing only the
	// go command would leave it spinning); the context is the backstop.
	args := []string{"test", "-count=1", "-failfast", "-timeout", timeout.String()}
	if run != "" {
		args = append(args, "-run", run)
	}
	tctx, cancel := context.WithTimeout(ctx, timeout+time.Minute)
	defer cancel()
	out, err := exec.CommandContext(tctx, "go", append(args, pkg)...).CombinedOutput()
	if err == nil {
		return "survived", ""
	}
	if bytes.Contains(out, []byte("[build failed]")) || bytes.Contains(out, []byte("[setup failed]")) {
		return "buildfail", ""
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "--- FAIL") {
			return "killed", strings.TrimSpace(line)
		}
	}
	return "killed", ""
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "mutate:", err)
	os.Exit(1)
}
