// Command copylua copies the Lua twins (the Functions library and the scripts) from the
// repository's lua/ into the Go module's lua/, which go:embed can reach: go generate
// runs it, and TestEmbeddedTwinsAreTheRepositorys fails when the copy is stale.
//
//	go run ./internal/copylua ../../lua lua
package main

import (
	"fmt"
	"os"
	"path/filepath"
)

// Files are the twins the package embeds, relative to lua/.
func files(from string) ([]string, error) {
	scripts, err := filepath.Glob(filepath.Join(from, "scripts", "*.lua"))
	if err != nil {
		return nil, err
	}
	out := []string{"ratelimit.lua"}
	for _, s := range scripts {
		out = append(out, filepath.Join("scripts", filepath.Base(s)))
	}
	return out, nil
}

func run(from, to string) error {
	names, err := files(from)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(to, "scripts")); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(to, "scripts"), 0o755); err != nil {
		return err
	}
	for _, name := range names {
		data, err := os.ReadFile(filepath.Join(from, name))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(to, name), data, 0o644); err != nil {
			return err
		}
	}
	fmt.Printf("copylua: %d files from %s to %s\n", len(names), from, to)
	return nil
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: copylua FROM TO")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "copylua:", err)
		os.Exit(1)
	}
}
