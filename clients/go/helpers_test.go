package ratelimit_test

import (
	"crypto/sha1"
	"io/fs"
	"os"
)

func sha1sum(s string) [20]byte { return sha1.Sum([]byte(s)) }

func osDirFS(dir string) fs.FS { return os.DirFS(dir) }
