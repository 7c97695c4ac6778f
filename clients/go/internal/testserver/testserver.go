// Package testserver starts the real servers the package's tests talk to: redis-server
// ($REDIS_SERVER, e.g. valkey-server from scripts/valkey.sh) on a free 127.0.0.1 port
// in a directory of its own, with the module ($RATELIMIT_MODULE, else the debug build
// that `make test-binaries` writes) or without it, and Clusters of three such servers.
// Each server is checked to be the process the test spawned (INFO server's process_id
// is the child's pid: other tests run on this machine at the same time) and killed when
// the test ends, its log printed if the test failed.
package testserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const startWithin = 20 * time.Second

// Repo is the repository's root (this file is clients/go/internal/testserver/...).
func Repo() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", "..", ".."))
}

// Binary is the server binary: $REDIS_SERVER, else redis-server.
func Binary() string {
	if b := os.Getenv("REDIS_SERVER"); b != "" {
		return b
	}
	return "redis-server"
}

// Module is the module's path: $RATELIMIT_MODULE, else target/debug's build.
func Module() (string, error) {
	path := os.Getenv("RATELIMIT_MODULE")
	if path == "" {
		path = filepath.Join(Repo(), "target", "debug", "libredis_ratelimit.so")
	}
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("the module %s is missing: run `make test-binaries` or set RATELIMIT_MODULE (%v)", path, err)
	}
	return path, nil
}

// FreePort is a port nothing listens on now (bind(0), then closed).
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Options of a server.
type Options struct {
	NoModule bool     // start it without the module
	Cluster  bool     // cluster-enabled (for Cluster)
	Port     int      // this port (0: a free one); used to start on a fixed port inside a private network namespace
	Extra    []string // more configuration lines
}

// Server is one running server.
type Server struct {
	Port    int
	BusPort int // the cluster bus port (Cluster nodes)
	Addr    string
	Dir     string
	cmd     *exec.Cmd
	done    chan struct{}
	mu      sync.Mutex
}

// Start starts a server and stops it when the test ends.
func Start(tb testing.TB, o Options) *Server {
	tb.Helper()
	s, err := Launch(o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("server %s log:\n%s", s.Addr, s.Log())
		}
		s.Stop()
	})
	return s
}

// Launch starts a server (tries up to five ports); the caller stops it.
func Launch(o Options) (*Server, error) {
	var failures []string
	for attempt := 0; attempt < 5; attempt++ {
		s, err := launch(o)
		if err == nil {
			return s, nil
		}
		failures = append(failures, err.Error())
		if o.Port != 0 {
			break
		}
	}
	return nil, fmt.Errorf("%s did not start:\n%s", Binary(), strings.Join(failures, "\n"))
}

func launch(o Options) (*Server, error) {
	port := o.Port
	if port == 0 {
		var err error
		if port, err = FreePort(); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp("", "rl-go-")
	if err != nil {
		return nil, err
	}
	lines := []string{
		"port " + strconv.Itoa(port), "bind 127.0.0.1", `save ""`, "appendonly no", "dir " + dir,
		"enable-debug-command local",
	}
	if !o.NoModule {
		module, err := Module()
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		lines = append(lines, "loadmodule "+module)
	}
	busPort := 0
	if o.Cluster {
		var err error
		busPort, err = FreePort()
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		lines = append(lines, "cluster-enabled yes", "cluster-config-file nodes.conf", "cluster-node-timeout 5000",
			"cluster-port "+strconv.Itoa(busPort))
	}
	lines = append(lines, o.Extra...)
	conf := filepath.Join(dir, "redis.conf")
	if err := os.WriteFile(conf, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	log, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer log.Close()
	cmd := exec.Command(Binary(), conf)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, log, log
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &Server{Port: port, BusPort: busPort, Addr: "127.0.0.1:" + strconv.Itoa(port), Dir: dir, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.done) }()
	if err := s.await(); err != nil {
		text := s.Log()
		s.Stop()
		return nil, fmt.Errorf("port %d: %v\n%s", port, err, text)
	}
	return s, nil
}

// await waits for the server to answer, and checks that it is the child: its
// process_id is the pid of the process started.
func (s *Server) await() error {
	deadline := time.Now().Add(startWithin)
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			return errors.New("the server exited")
		default:
		}
		pid, err := s.processID()
		if err == nil {
			if pid != s.cmd.Process.Pid {
				return fmt.Errorf("127.0.0.1:%d answers with process_id %d, not the started server's pid %d: another server took the port", s.Port, pid, s.cmd.Process.Pid)
			}
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("no answer within %v", startWithin)
}

func (s *Server) processID() (int, error) {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: time.Second, Protocol: 2})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("INFO server has no process_id")
}

// Pid is the server process's pid.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Client is a go-redis client of this server, closed when the test ends.
func (s *Server) Client(tb testing.TB) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	tb.Cleanup(func() { c.Close() })
	return c
}

// Log is the server's log.
func (s *Server) Log() string {
	data, _ := os.ReadFile(filepath.Join(s.Dir, "server.log"))
	return string(data)
}

// Stop kills the server (SIGKILL) and removes its directory.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
	os.RemoveAll(s.Dir)
}

// Cluster is three primaries, the slots split between them.
type Cluster struct {
	Nodes []*Server
}

// Addrs are the nodes' addresses.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr
	}
	return out
}

// StartCluster starts a Cluster and stops it when the test ends.
func StartCluster(tb testing.TB, o Options) *Cluster {
	tb.Helper()
	c, err := LaunchCluster(o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			for _, n := range c.Nodes {
				tb.Logf("cluster node %s log:\n%s", n.Addr, n.Log())
			}
		}
		c.Stop()
	})
	return c
}

// Stop stops every node.
func (c *Cluster) Stop() {
	for _, n := range c.Nodes {
		n.Stop()
	}
}

// LaunchCluster starts three cluster-enabled servers, gives each a third of the slots,
// joins them, and waits until every node says cluster_state:ok; the caller stops it.
func LaunchCluster(o Options) (*Cluster, error) {
	o.Cluster = true
	c := &Cluster{}
	fail := func(err error) (*Cluster, error) {
		c.Stop()
		return nil, err
	}
	for i := 0; i < 3; i++ {
		n, err := Launch(o)
		if err != nil {
			return fail(err)
		}
		c.Nodes = append(c.Nodes, n)
	}
	ctx := context.Background()
	ranges := [][2]int{{0, 5460}, {5461, 10922}, {10923, 16383}}
	var clients []*redis.Client
	for i, n := range c.Nodes {
		cl := redis.NewClient(&redis.Options{Addr: n.Addr})
		defer cl.Close()
		clients = append(clients, cl)
		if err := cl.ClusterAddSlotsRange(ctx, ranges[i][0], ranges[i][1]).Err(); err != nil {
			return fail(fmt.Errorf("CLUSTER ADDSLOTSRANGE on %s: %v", n.Addr, err))
		}
	}
	for _, n := range c.Nodes[1:] {
		meet := clients[0].Do(ctx, "CLUSTER", "MEET", "127.0.0.1", n.Port, n.BusPort)
		if err := meet.Err(); err != nil {
			return fail(fmt.Errorf("CLUSTER MEET %s: %v", n.Addr, err))
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, cl := range clients {
		for {
			info, err := cl.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_known_nodes:3") {
				break
			}
			if time.Now().After(deadline) {
				return fail(fmt.Errorf("the cluster is not ok after 60 s: %v %s", err, info))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return c, nil
}

// Servers shared by the tests of one package: started on first use, stopped by Main.
var shared struct {
	sync.Mutex
	servers  map[string]*Server
	clusters map[string]*Cluster
}

// once is the entry name of m, made by launch on first use.
func once[T any](tb testing.TB, m *map[string]T, name string, launch func() (T, error)) T {
	tb.Helper()
	shared.Lock()
	defer shared.Unlock()
	if v, ok := (*m)[name]; ok {
		return v
	}
	v, err := launch()
	if err != nil {
		tb.Fatal(err)
	}
	if *m == nil {
		*m = map[string]T{}
	}
	(*m)[name] = v
	return v
}

// Shared is the package's server of this name (started with o on first use).
func Shared(tb testing.TB, name string, o Options) *Server {
	return once(tb, &shared.servers, name, func() (*Server, error) { return Launch(o) })
}

// SharedCluster is the package's Cluster of this name (started on first use).
func SharedCluster(tb testing.TB, name string, o Options) *Cluster {
	return once(tb, &shared.clusters, name, func() (*Cluster, error) { return LaunchCluster(o) })
}

// Main runs the tests, then stops the shared servers (printing their logs when a test
// failed).
func Main(m *testing.M) {
	code := m.Run()
	shared.Lock()
	for name, s := range shared.servers {
		if code != 0 {
			fmt.Fprintf(os.Stderr, "shared server %s (%s) log:\n%s\n", name, s.Addr, s.Log())
		}
		s.Stop()
	}
	for _, c := range shared.clusters {
		c.Stop()
	}
	shared.Unlock()
	os.Exit(code)
}
