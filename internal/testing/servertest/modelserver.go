package servertest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// What the tests of tt-model-server's core and of each model's routes (server, server/pi05,
// server/rfdetr) share: a log that keeps nothing, a server run on a free port, POSTs, the value of
// one /metrics series, and a client that stalls.

// DiscardLog is a logger that drops every line.
func DiscardLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// Run calls run (a server's Run) on a free loopback port and returns its base URL and run's
// result, once it returns.
func Run(t testing.TB, ctx context.Context, run func(context.Context, net.Listener) error) (string, chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- run(ctx, ln) }()
	return "http://" + ln.Addr().String(), done
}

// Post POSTs body as JSON to url and returns the status code and the whole body; a request that
// gets no answer fails the test.
func Post(t testing.TB, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Fetch GETs url and returns the response (its body read and closed) and the body.
func Fetch(t testing.TB, url string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// MetricValue is the value of the series name (with or without labels) on base's /metrics, ""
// when there is none.
func MetricValue(t testing.TB, base, name string) string {
	t.Helper()
	_, text := Get(t, base+"/metrics")
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
			return line[strings.LastIndex(line, " ")+1:]
		}
	}
	return ""
}

// MetricNumber is MetricValue as a number; a series that is missing or not a number fails the test.
func MetricNumber(t testing.TB, base, name string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(MetricValue(t, base, name), 64)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return v
}

// WaitMetric polls /metrics until name reads want.
func WaitMetric(t testing.TB, base, name string, want float64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); MetricNumber(t, base, name) != want; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s is %s, want %v", name, MetricValue(t, base, name), want)
		}
	}
}

// Stall opens a connection, sends the headers of a POST with a 1 MB body and its first byte,
// then nothing: a slow or silent client.
func Stall(t testing.TB, base, path string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{", path)
	return c
}

// Answered reports whether c has received any bytes within wait, and the status line if so.
func Answered(c net.Conn, wait time.Duration) (bool, string) {
	_ = c.SetReadDeadline(time.Now().Add(wait))
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil || line != "", strings.TrimSpace(line)
}

// Body is the body of GET url.
func Body(t testing.TB, url string) string {
	t.Helper()
	_, b := Fetch(t, url)
	return b
}
