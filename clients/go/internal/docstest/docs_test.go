// Package docstest runs the Go section of docs/clients.md as written: every ```go block
// is a whole program, built in a module of its own (this module replaced by its
// checkout), then run twice against a server with the module; a program that serves
// HTTP is served on a free loopback port and requested until it answers 429.
package docstest

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/testserver"
)

const module = "github.com/redis-ratelimit/redis-ratelimit/clients/go"

func TestMain(m *testing.M) { testserver.Main(m) }

// goBlocks are the ```go blocks of the page's section headed "## Go".
func goBlocks(t *testing.T) []string {
	data, err := os.ReadFile(filepath.Join(testserver.Repo(), "docs", "clients.md"))
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	var open *strings.Builder
	inSection := false
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
			inSection = line == "## Go"
		case !inSection:
		case open == nil && strings.TrimSpace(line) == "```go":
			open = &strings.Builder{}
		case open != nil && strings.TrimSpace(line) == "```":
			blocks = append(blocks, open.String())
			open = nil
		case open != nil:
			open.WriteString(line + "\n")
		}
	}
	if len(blocks) < 4 {
		t.Fatalf("docs/clients.md's Go section has %d go blocks, not at least 4", len(blocks))
	}
	return blocks
}

func goCmd(dir string, args ...string) *exec.Cmd {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	// The modules are those of this module (in the cache), checked by its go.sum.
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOSUMDB=off", "GOWORK=off")
	return cmd
}

// build writes each block as a program of one module and builds them all.
func build(t *testing.T, blocks []string) []string {
	here := filepath.Join(testserver.Repo(), "clients", "go")
	work := t.TempDir()
	mod, err := os.ReadFile(filepath.Join(here, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	var require []string
	for _, line := range strings.Split(string(mod), "\n") {
		if f := strings.Fields(line); len(f) == 2 && (strings.HasPrefix(f[0], "github.com/redis/") || strings.HasPrefix(f[0], "golang.org/")) {
			require = append(require, "require "+f[0]+" "+f[1])
		}
	}
	gomod := "module example.test/docs\n\ngo 1.22\n\nrequire " + module + " v0.0.0\n" + strings.Join(require, "\n") +
		"\nreplace " + module + " => " + here + "\n"
	sum, err := os.ReadFile(filepath.Join(here, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"go.mod": gomod, "go.sum": string(sum)}
	var bins []string
	for i, b := range blocks {
		if !strings.HasPrefix(b, "package main\n") {
			t.Fatalf("block %d is not a whole program (package main):\n%s", i+1, b)
		}
		name := fmt.Sprintf("block%d", i+1)
		files[filepath.Join(name, "main.go")] = b
		bins = append(bins, filepath.Join(work, "bin", name))
	}
	for name, text := range files {
		path := filepath.Join(work, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := goCmd(work, "mod", "tidy").CombinedOutput(); err != nil {
		t.Fatalf("go mod tidy: %v\n%s", err, out)
	}
	if out, err := goCmd(work, "vet", "./...").CombinedOutput(); err != nil {
		t.Fatalf("go vet of the blocks: %v\n%s", err, out)
	}
	if out, err := goCmd(work, "build", "-o", filepath.Join(work, "bin")+"/", "./...").CombinedOutput(); err != nil {
		t.Fatalf("go build of the blocks: %v\n%s", err, out)
	}
	return bins
}

func TestTheGoSectionRunsAsWritten(t *testing.T) {
	blocks := goBlocks(t)
	bins := build(t, blocks)
	s := testserver.Shared(t, "module", testserver.Options{})
	for run := 1; run <= 2; run++ {
		for i, bin := range bins {
			if strings.Contains(blocks[i], "ListenAndServe") {
				serveUntil429(t, bin, s.Addr)
				continue
			}
			cmd := exec.Command(bin)
			cmd.Env = append(os.Environ(), "REDIS_ADDR="+s.Addr)
			out, err := runBounded(cmd, time.Minute)
			if err != nil {
				t.Fatalf("run %d, block %d: %v\n%s\n%s", run, i+1, err, out, blocks[i])
			}
			t.Logf("block %d: %s", i+1, out)
		}
	}
}

func runBounded(cmd *exec.Cmd, limit time.Duration) ([]byte, error) {
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return []byte(out.String()), err
	case <-time.After(limit):
		_ = cmd.Process.Kill()
		<-done
		return []byte(out.String()), fmt.Errorf("still running after %v", limit)
	}
}

// serveUntil429 serves a block's app on a free port and requests it until a 429 with
// the rate limit headers (at most 50 requests).
func serveUntil429(t *testing.T, bin, redisAddr string) {
	port, err := testserver.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.Env = append(os.Environ(), "REDIS_ADDR="+redisAddr, "PORT="+strconv.Itoa(port))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	url := "http://127.0.0.1:" + strconv.Itoa(port) + "/"
	deadline := time.Now().Add(30 * time.Second)
	var statuses []int
	for len(statuses) < 50 {
		res, err := http.Get(url)
		if err != nil {
			if time.Now().After(deadline) {
				t.Fatalf("the app does not answer on %s: %v\n%s", url, err, log.String())
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		statuses = append(statuses, res.StatusCode)
		if res.StatusCode == http.StatusTooManyRequests {
			for _, h := range []string{"Retry-After", "RateLimit-Limit", "RateLimit-Policy", "RateLimit"} {
				if res.Header.Get(h) == "" {
					t.Fatalf("the 429 has no %s: %v", h, res.Header)
				}
			}
			return
		}
		if res.StatusCode != 200 {
			t.Fatalf("status %d\n%s", res.StatusCode, log.String())
		}
	}
	t.Fatalf("no 429 in %d requests: %v\n%s", len(statuses), statuses, log.String())
}
