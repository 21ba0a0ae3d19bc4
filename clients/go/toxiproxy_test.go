// toxiproxy's own Go client (github.com/Shopify/toxiproxy/v2/client, vendored unchanged) driving
// a Roam run: every call its README shows, against `roam run --toxiproxy-port 0`, with each
// effect measured by a real connection through the proxy. Run by `make toxiproxy-go`, which sets
// ROAM_BINARY to the built roam; without it every test fails.
package toxiproxygo_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
)

// The run every test drives, started once by TestMain.
var (
	runID      string
	endpoint   string // where the run serves toxiproxy's API, HOST:PORT
	startError error
)

// TestMain starts `roam run` (rootless, the userspace emulator, held until stopped), as a Go
// suite would start toxiproxy-server, then stops it with `roam ctl RUN stop`.
func TestMain(m *testing.M) {
	binary := os.Getenv("ROAM_BINARY")
	var run *exec.Cmd
	if binary == "" {
		startError = errors.New("ROAM_BINARY is not set: run `make toxiproxy-go`")
	} else {
		run, startError = start(binary)
	}
	code := m.Run()
	if run != nil {
		if err := stop(binary, run); err != nil {
			fmt.Fprintln(os.Stderr, "toxiproxy-go:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func start(binary string) (*exec.Cmd, error) {
	report, err := os.MkdirTemp("", "roam-toxiproxy-go-")
	if err != nil {
		return nil, err
	}
	scenario, err := filepath.Abs("../../scenarios/walk-out-of-home.yaml")
	if err != nil {
		return nil, err
	}
	run := exec.Command(binary, "run", scenario, "--control", "--quiet", "--hold", "--rootless",
		"--backend", "userspace", "--time-scale", "0.25", "--toxiproxy-port", "0", "--report", report)
	run.Stderr = os.Stderr
	// Its own session, and SIGTERM (a run's cleanup and report) if this test process dies
	// first, say at go test's timeout: a held run is never left behind.
	run.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGTERM}
	output, err := run.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := run.Start(); err != nil {
		return nil, err
	}
	// The first line announces the run once its network is up.
	lines := make(chan string, 1)
	go func() {
		reader := bufio.NewReader(output)
		line, _ := reader.ReadString('\n')
		lines <- line
		_, _ = io.Copy(io.Discard, reader)
	}()
	select {
	case line := <-lines:
		var announced struct {
			Control struct {
				RunID     string `json:"runId"`
				Toxiproxy string `json:"toxiproxy"`
			} `json:"control"`
		}
		if err := json.Unmarshal([]byte(line), &announced); err != nil || announced.Control.Toxiproxy == "" {
			_ = run.Process.Kill()
			_ = run.Wait()
			return nil, fmt.Errorf("roam run announced %q (%v)", line, err)
		}
		runID, endpoint = announced.Control.RunID, announced.Control.Toxiproxy
		return run, nil
	case <-time.After(120 * time.Second):
		_ = run.Process.Signal(syscall.SIGTERM)
		_ = run.Wait()
		return nil, errors.New("roam run did not start within 120 s")
	}
}

func stop(binary string, run *exec.Cmd) error {
	if output, err := exec.Command(binary, "ctl", runID, "stop").CombinedOutput(); err != nil {
		_ = run.Process.Signal(syscall.SIGTERM)
		_ = run.Wait()
		return fmt.Errorf("roam ctl %s stop: %v: %s", runID, err, output)
	}
	ended := make(chan error, 1)
	go func() { ended <- run.Wait() }()
	select {
	case <-ended:
		return nil
	case <-time.After(120 * time.Second):
		_ = run.Process.Kill()
		return errors.New("roam run did not end within 120 s of its stop")
	}
}

// client is the README's first line, pointed at the run.
func client(t *testing.T) *toxiproxy.Client {
	t.Helper()
	if startError != nil {
		t.Fatal(startError)
	}
	return toxiproxy.NewClient(endpoint)
}

// echo is a TCP echo server on the host's loopback: the upstream, as redis is in the README.
func echo(t *testing.T) string {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { listener.Close() })
	go func() {
		for {
			connection, err := listener.Accept()
			if err != nil {
				return
			}
			go func() {
				defer connection.Close()
				_, _ = io.Copy(connection, connection)
			}()
		}
	}()
	return listener.Addr().String()
}

// roundTrip sends five bytes through the proxy at listen and returns how long the echo took.
func roundTrip(t *testing.T, listen string) time.Duration {
	t.Helper()
	connection, err := net.DialTimeout("tcp", listen, 10*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", listen, err)
	}
	defer connection.Close()
	_ = connection.SetDeadline(time.Now().Add(10 * time.Second))
	began := time.Now()
	if _, err := connection.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	answer := make([]byte, 5)
	if _, err := io.ReadFull(connection, answer); err != nil {
		t.Fatalf("read through %s: %v", listen, err)
	}
	if string(answer) != "hello" {
		t.Fatalf("echoed %q", answer)
	}
	return time.Since(began)
}

func within(t *testing.T, what string, took time.Duration, low, high time.Duration) {
	t.Helper()
	t.Logf("%s: %v", what, took.Round(100*time.Microsecond))
	if took < low || took > high {
		t.Errorf("%s took %v, not within %v-%v", what, took, low, high)
	}
}

func apiStatus(err error) int {
	var refused *toxiproxy.ApiError
	if errors.As(err, &refused) {
		return refused.Status
	}
	return 0
}

// The README's usage, call by call: create, toxics added, updated and removed, disable and
// enable, delete.
func TestReadmeUsage(t *testing.T) {
	client := client(t)
	version, err := client.Version()
	if err != nil || !strings.Contains(string(version), "version") {
		t.Fatalf("version: %q %v", version, err)
	}
	upstream := echo(t)
	proxy, err := client.CreateProxy("redis", "127.0.0.1:0", upstream)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Delete()
	if !proxy.Enabled || !strings.HasPrefix(proxy.Listen, "127.0.0.1:") || strings.HasSuffix(proxy.Listen, ":0") {
		t.Fatalf("created %+v", proxy)
	}
	within(t, "a round trip through the proxy", roundTrip(t, proxy.Listen), 0, 100*time.Millisecond)
	if _, err := client.CreateProxy("redis", "127.0.0.1:0", upstream); apiStatus(err) != 409 {
		t.Errorf("a second proxy of the name: %v, want toxiproxy's 409", err)
	}

	// Add 1s latency to 100% of downstream connections (here 300 ms).
	if _, err := proxy.AddToxic("latency_down", "latency", "downstream", 1.0, toxiproxy.Attributes{"latency": 300}); err != nil {
		t.Fatal(err)
	}
	within(t, "the echo with 300 ms downstream", roundTrip(t, proxy.Listen), 270*time.Millisecond, 330*time.Millisecond)

	// Change downstream latency to add 100ms of jitter: the latency is kept.
	if _, err := proxy.UpdateToxic("latency_down", 1.0, toxiproxy.Attributes{"jitter": 100}); err != nil {
		t.Fatal(err)
	}
	toxics, err := proxy.Toxics()
	if err != nil || len(toxics) != 1 || toxics[0].Name != "latency_down" || toxics[0].Stream != "downstream" ||
		toxics[0].Attributes["latency"] != float64(300) || toxics[0].Attributes["jitter"] != float64(100) {
		t.Fatalf("toxics after the update: %+v %v", toxics, err)
	}
	within(t, "the echo with 300 ± 100 ms", roundTrip(t, proxy.Listen), 170*time.Millisecond, 430*time.Millisecond)

	// Remove the latency toxic.
	if err := proxy.RemoveToxic("latency_down"); err != nil {
		t.Fatal(err)
	}
	within(t, "the echo without toxics", roundTrip(t, proxy.Listen), 0, 100*time.Millisecond)

	// The proxy can be taken down using Disable(), and back with Enable(), where it was.
	if err := proxy.Disable(); err != nil {
		t.Fatal(err)
	}
	if connection, err := net.DialTimeout("tcp", proxy.Listen, 2*time.Second); err == nil {
		connection.Close()
		t.Errorf("connected to a disabled proxy at %s", proxy.Listen)
	}
	if err := proxy.Enable(); err != nil {
		t.Fatal(err)
	}
	within(t, "the echo after Enable", roundTrip(t, proxy.Listen), 0, 100*time.Millisecond)

	// Delete: gone from the API.
	if err := proxy.Delete(); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Proxy("redis"); apiStatus(err) != 404 {
		t.Errorf("a deleted proxy: %v, want toxiproxy's 404", err)
	}
}

// The README's full example: Populate at start, then a test that takes the backend down and one
// that adds a toxic with the defaults (no name, no stream: latency_downstream), Save() after.
func TestReadmeFullExample(t *testing.T) {
	client := client(t)
	upstream := echo(t)
	proxies, err := client.Populate([]toxiproxy.Proxy{{Name: "backend", Listen: "127.0.0.1:0", Upstream: upstream, Enabled: true}})
	if err != nil || len(proxies) != 1 || proxies[0].Name != "backend" {
		t.Fatalf("populate: %+v %v", proxies, err)
	}
	defer proxies[0].Delete()
	listen := proxies[0].Listen

	t.Run("BackendDown", func(t *testing.T) {
		proxy, _ := client.Proxy("backend")
		proxy.Disable()
		defer proxy.Enable()
		if connection, err := net.DialTimeout("tcp", listen, 2*time.Second); err == nil {
			connection.Close()
			t.Fatal("Connection to the backend did not fail")
		}
	})
	t.Run("BackendSlow", func(t *testing.T) {
		proxy, _ := client.Proxy("backend")
		if !proxy.Enabled {
			t.Fatal("the deferred Enable did not take")
		}
		if _, err := proxy.AddToxic("", "latency", "", 1, toxiproxy.Attributes{"latency": 1000}); err != nil {
			t.Fatal(err)
		}
		proxy.Save()
		defer proxy.RemoveToxic("latency_downstream")
		within(t, "the echo with the default toxic", roundTrip(t, listen), 950*time.Millisecond, 1100*time.Millisecond)
	})
	// Populated again with the same proxy: kept, not made twice.
	again, err := client.Populate([]toxiproxy.Proxy{{Name: "backend", Listen: listen, Upstream: upstream, Enabled: true}})
	if err != nil || len(again) != 1 || again[0].Listen != listen {
		t.Fatalf("populate again: %+v %v", again, err)
	}
	all, err := client.Proxies()
	if err != nil || all["backend"] == nil || len(all["backend"].ActiveToxics) != 0 {
		t.Fatalf("proxies: %+v %v", all, err)
	}
}

// The client's own AddToxic (ToxicOptions), limit_data upstream and downstream, and ResetState.
func TestToxicOptionsAndReset(t *testing.T) {
	client := client(t)
	proxy, err := client.CreateProxy("limited", "127.0.0.1:0", echo(t))
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Delete()
	toxic, err := client.AddToxic(&toxiproxy.ToxicOptions{ProxyName: "limited", ToxicName: "cut", ToxicType: "limit_data",
		Stream: "downstream", Toxicity: 1, Attributes: toxiproxy.Attributes{"bytes": 3}})
	if err != nil || toxic.Name != "cut" || toxic.Type != "limit_data" {
		t.Fatalf("add: %+v %v", toxic, err)
	}
	// Three bytes of the echo come back, then the proxy closes the connection.
	connection, err := net.DialTimeout("tcp", proxy.Listen, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = connection.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = connection.Write([]byte("hello"))
	received, err := io.ReadAll(connection)
	connection.Close()
	if string(received) != "hel" {
		t.Errorf("through limit_data of 3 bytes: %q (%v), want \"hel\" and the end", received, err)
	}
	if _, err := client.UpdateToxic(&toxiproxy.ToxicOptions{ProxyName: "limited", ToxicName: "cut", Toxicity: 1,
		Attributes: toxiproxy.Attributes{"bytes": 4}}); err != nil {
		t.Fatal(err)
	}
	if err := proxy.Disable(); err != nil {
		t.Fatal(err)
	}
	// Reset: every proxy enabled again, every toxic gone.
	if err := client.ResetState(); err != nil {
		t.Fatal(err)
	}
	after, err := client.Proxy("limited")
	if err != nil || !after.Enabled || len(after.ActiveToxics) != 0 {
		t.Fatalf("after reset: %+v %v", after, err)
	}
	within(t, "the echo after reset", roundTrip(t, proxy.Listen), 0, 100*time.Millisecond)
	// (The client's RemoveToxic says the API's error in its text only.)
	if err := client.RemoveToxic(&toxiproxy.ToxicOptions{ProxyName: "limited", ToxicName: "cut"}); err == nil || !strings.Contains(err.Error(), "HTTP 404") {
		t.Errorf("removing a toxic reset took away: %v, want 404", err)
	}
}
