package ratelimit

import (
	"context"
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"errors"
	"io/fs"
	"path"
	"regexp"
	"strings"
	"sync/atomic"
)

// The twins are copied from the repository's lua/ into this module's lua/ (go:embed
// cannot reach outside the module): `go generate` copies them, and a test fails when
// the copy differs from lua/.
//
//go:generate go run ./internal/copylua ../../lua lua
//go:embed lua/ratelimit.lua lua/scripts/*.lua
var embedded embed.FS

// ErrTwinUnavailable: the command has no Lua twin (RL.SWEEP), or the Lua sources in use
// lack it.
var ErrTwinUnavailable = errors.New("ratelimit: no Lua twin")

// LuaSources are the twins: the Functions library `ratelimit` and one self-contained
// script per function (rl_fixed, rl_gcra...).
type LuaSources struct {
	Library string
	Scripts map[string]string
}

// EmbeddedLua is the twins the package carries (the repository's lua/).
func EmbeddedLua() LuaSources {
	src, err := ReadLua(embedded, "lua")
	if err != nil {
		panic("ratelimit: the embedded Lua twins cannot be read: " + err.Error()) // a broken build
	}
	return src
}

// ReadLua reads twins laid out as the repository's lua/ (ratelimit.lua and
// scripts/*.lua) under dir of fsys: os.DirFS("/usr/share/redis-ratelimit"), "lua".
func ReadLua(fsys fs.FS, dir string) (LuaSources, error) {
	library, err := fs.ReadFile(fsys, dir+"/ratelimit.lua")
	if err != nil {
		return LuaSources{}, err
	}
	names, err := fs.Glob(fsys, dir+"/scripts/*.lua")
	if err != nil {
		return LuaSources{}, err
	}
	src := LuaSources{Library: string(library), Scripts: map[string]string{}}
	for _, name := range names {
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return LuaSources{}, err
		}
		base := name[strings.LastIndex(name, "/")+1:]
		src.Scripts[strings.TrimSuffix(base, ".lua")] = string(body)
	}
	return src, nil
}

var (
	functionNotFound = regexp.MustCompile(`(?i)function not found|no such function`)
	noFunctions      = regexp.MustCompile(`(?i)unknown command|unknown subcommand|NOPERM|not allowed|disabled`)
)

func replyMatches(err error, re *regexp.Regexp) bool {
	text, ok := replyText(err)
	return ok && re.MatchString(text)
}

// twinFunctions are the functions the calls run (a call's twin): one embedded script
// each, named after its function in the library.
func twinFunctions() []string {
	paths, _ := fs.Glob(embedded, "lua/scripts/*.lua")
	names := make([]string, 0, len(paths))
	for _, p := range paths {
		names = append(names, strings.TrimSuffix(path.Base(p), ".lua"))
	}
	return names
}

// twins runs the twins on one server or Cluster: FCALL of the library's function
// (FUNCTION LOAD REPLACE on every primary when it is missing), and where FUNCTION is
// refused (an ACL, a renamed command, a managed service) the scripts, with EVALSHA and
// EVAL the first time.
type twins struct {
	src       LuaSources
	inLibrary map[string]bool   // function name -> the library has it
	shas      map[string]string // function name -> sha1 of its script
	scripts   atomic.Bool       // run the scripts: there is no library, or FUNCTION was refused
}

func newTwins(src LuaSources) *twins {
	t := &twins{src: src, inLibrary: map[string]bool{}, shas: map[string]string{}}
	for _, fn := range twinFunctions() {
		t.inLibrary[fn] = strings.Contains(src.Library, "'"+fn+"'") || strings.Contains(src.Library, `"`+fn+`"`)
	}
	for fn, source := range src.Scripts {
		sum := sha1.Sum([]byte(source))
		t.shas[fn] = hex.EncodeToString(sum[:])
	}
	t.scripts.Store(src.Library == "")
	return t
}

func fcall(kind, fn string, keys, args []string) Command {
	return Command{Name: kind, Head: []string{fn, itoa(int64(len(keys)))}, Keys: keys, Args: args}
}

func (t *twins) run(ctx context.Context, conn Conn, fn string, keys, args []string) (any, error) {
	if !t.scripts.Load() && t.inLibrary[fn] {
		reply, err := conn.Do(ctx, fcall("FCALL", fn, keys, args))
		switch {
		case err == nil:
			return reply, nil
		case replyMatches(err, noFunctions):
			t.scripts.Store(true)
		case !replyMatches(err, functionNotFound):
			return nil, err
		default:
			loaded, err := t.load(ctx, conn)
			if err != nil {
				return nil, err
			}
			if loaded {
				reply, err := conn.Do(ctx, fcall("FCALL", fn, keys, args))
				if err == nil {
					return reply, nil
				}
				if !replyMatches(err, functionNotFound) {
					return nil, err
				}
			}
		}
	}
	return t.script(ctx, conn, fn, keys, args)
}

// load loads the library on every primary (replacing an older version of it); false
// when the server does not allow FUNCTION.
func (t *twins) load(ctx context.Context, conn Conn) (bool, error) {
	nodes, err := conn.Primaries(ctx)
	if err != nil {
		return false, err
	}
	for _, node := range nodes {
		_, err := node.Do(ctx, Command{Name: "FUNCTION", Head: []string{"LOAD", "REPLACE", t.src.Library}})
		if replyMatches(err, noFunctions) {
			t.scripts.Store(true)
			return false, nil
		}
		if err != nil {
			return false, err
		}
	}
	return true, nil
}

func (t *twins) script(ctx context.Context, conn Conn, fn string, keys, args []string) (any, error) {
	source, ok := t.src.Scripts[fn]
	if !ok {
		return nil, errors.Join(ErrTwinUnavailable, errors.New("no script "+fn+".lua"))
	}
	reply, err := conn.Do(ctx, fcall("EVALSHA", t.shas[fn], keys, args))
	text, _ := replyText(err)
	if !strings.HasPrefix(text, "NOSCRIPT") {
		return reply, err
	}
	return conn.Do(ctx, fcall("EVAL", source, keys, args))
}
