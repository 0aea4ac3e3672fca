// Package robots drives a pi0.5 server with closed-loop robots, as the seed package's
// bench_multirobot does over HTTP: every robot is its own loop (send a request with its robot_id,
// wait for the answer, think, send the next); a robot that gets a 503 is retired (the server said
// it has no room for it). A session reports per robot the latency p50 / p99, the completed
// requests, its device and its 503 (and how fast that 503 came), per device the requests and batch
// sizes, and whether every admitted robot held the server's SLO.
package robots

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// Session is one run with a fixed robot count.
type Session struct {
	Robots     int           `json:"robots"`
	Duration   string        `json:"duration"`
	Think      string        `json:"think"`
	SLOMS      float64       `json:"slo_ms,omitempty"`
	SLOP99MS   float64       `json:"slo_p99_ms,omitempty"`
	RMax       int           `json:"r_max"`
	PerRobot   []RobotStats  `json:"robots_stats"`
	PerDevice  []DeviceStats `json:"devices"`
	Completed  int           `json:"completed"`
	Rejected   int           `json:"rejected_503"`
	Errors     int           `json:"errors"`
	WithinSLO  *bool         `json:"admitted_within_slo,omitempty"`
	Throughput float64       `json:"requests_per_s"`
}

// RobotStats is one robot's loop.
type RobotStats struct {
	ID        string  `json:"id"`
	Device    string  `json:"device"`
	Completed int     `json:"completed"`
	P50MS     float64 `json:"p50_ms"`
	P99MS     float64 `json:"p99_ms"`
	MaxMS     float64 `json:"max_ms"`
	Rejected  bool    `json:"rejected_503"`
	RejectMS  float64 `json:"reject_ms,omitempty"` // how long its 503 took
	Reason    string  `json:"reject_detail,omitempty"`
	Errors    int     `json:"errors"`
	latencies []time.Duration
}

// DeviceStats is what one device ran.
type DeviceStats struct {
	Device    string  `json:"device"`
	Requests  int     `json:"requests"`
	MeanBatch float64 `json:"mean_batch"`
	MaxBatch  int     `json:"max_batch"`
}

// Options describe the sessions to run.
type Options struct {
	URL      string
	Robots   []int         // robot counts, one session each
	Duration time.Duration // each session's length
	Think    time.Duration // a robot's pause between an answer and its next request
	Cameras  int           // images per request (0: the server's PI05_NUM_IMAGES)
	Side     int           // frame side in pixels (0: 224)
	Progress io.Writer     // progress lines (nil: none)
}

// Run runs one session per robot count, printing each as a table to out.
func Run(ctx context.Context, o Options, out io.Writer) ([]Session, error) {
	info, err := serverInfo(o.URL)
	if err != nil {
		return nil, err
	}
	if o.Cameras == 0 {
		o.Cameras = info.cameras
	}
	if o.Side == 0 {
		o.Side = 224
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	frame, err := framePNG(o.Side)
	if err != nil {
		return nil, err
	}
	var sessions []Session
	for _, n := range o.Robots {
		fmt.Fprintf(o.Progress, "robots: %d robots for %s against %s\n", n, o.Duration, o.URL)
		s := session(ctx, o, n, frame)
		s.SLOMS, s.SLOP99MS = info.slo, info.sloP99
		if after, err := serverInfo(o.URL); err == nil {
			s.RMax = after.rmax
		}
		if info.slo > 0 {
			ok := true
			for _, r := range s.PerRobot {
				if r.Completed > 0 && (r.P50MS > info.slo || r.P99MS > info.sloP99) {
					ok = false
				}
			}
			s.WithinSLO = &ok
		}
		sessions = append(sessions, s)
		PrintSession(out, s)
		// let the robots of this session go idle before the next one binds new ones
		time.Sleep(time.Duration(info.idleS*float64(time.Second)) + 500*time.Millisecond)
	}
	return sessions, nil
}

// session runs n closed-loop robots for o.duration.
func session(ctx context.Context, o Options, n int, frame string) Session {
	client := &http.Client{Timeout: 10 * time.Minute}
	deadline := time.Now().Add(o.Duration)
	stats := make([]RobotStats, n)
	type call struct {
		device string
		batch  int
	}
	var mu sync.Mutex
	var calls []call
	var wg sync.WaitGroup
	for i := range stats {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := &stats[i]
			st.ID = fmt.Sprintf("robot-%d", i)
			for seq := 0; time.Now().Before(deadline); seq++ {
				body := requestBody(st.ID, o.Cameras, frame, seq)
				t0 := time.Now()
				resp, err := client.Post(o.URL+"/predict", "application/json", bytes.NewReader(body))
				took := time.Since(t0)
				if err != nil {
					st.Errors++
					if errors.Is(ctx.Err(), context.Canceled) {
						return
					}
					continue
				}
				raw, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusOK:
					st.Completed++
					st.latencies = append(st.latencies, took)
					st.Device = resp.Header.Get("X-TT-Device")
					b, _ := strconv.Atoi(resp.Header.Get("X-TT-Batched-As"))
					mu.Lock()
					calls = append(calls, call{st.Device, b})
					mu.Unlock()
				case http.StatusServiceUnavailable:
					st.Rejected, st.RejectMS = true, ms(took)
					var d struct {
						Detail string `json:"detail"`
					}
					_ = json.Unmarshal(raw, &d)
					st.Reason = d.Detail
					return // retired: the server has no room for this robot
				default:
					st.Errors++
				}
				if o.Think > 0 {
					time.Sleep(o.Think)
				}
			}
		}()
	}
	wg.Wait()
	s := Session{Robots: n, Duration: o.Duration.String(), Think: o.Think.String()}
	for i := range stats {
		st := &stats[i]
		slices.Sort(st.latencies)
		if len(st.latencies) > 0 {
			st.P50MS, st.P99MS = ms(quantile(st.latencies, 0.5)), ms(quantile(st.latencies, 0.99))
			st.MaxMS = ms(st.latencies[len(st.latencies)-1])
		}
		s.Completed += st.Completed
		s.Errors += st.Errors
		if st.Rejected {
			s.Rejected++
		}
		s.PerRobot = append(s.PerRobot, *st)
	}
	s.Throughput = float64(s.Completed) / o.Duration.Seconds()
	byDev := map[string]*DeviceStats{}
	for _, c := range calls {
		d := byDev[c.device]
		if d == nil {
			d = &DeviceStats{Device: c.device}
			byDev[c.device] = d
		}
		d.Requests++
		d.MeanBatch += float64(c.batch)
		d.MaxBatch = max(d.MaxBatch, c.batch)
	}
	for _, d := range byDev {
		d.MeanBatch /= float64(d.Requests)
		s.PerDevice = append(s.PerDevice, *d)
	}
	slices.SortFunc(s.PerDevice, func(a, b DeviceStats) int { return strings.Compare(a.Device, b.Device) })
	return s
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	i := int(q * float64(len(sorted)-1))
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// PrintSession prints a session as a per-robot and a per-device table.
func PrintSession(w io.Writer, s Session) {
	fmt.Fprintf(w, "\n%d robots, %s, think %s: %d completed (%.2f/s), %d answered 503, %d errors", s.Robots, s.Duration, s.Think,
		s.Completed, s.Throughput, s.Rejected, s.Errors)
	if s.WithinSLO != nil {
		fmt.Fprintf(w, "; SLO p50 %g / p99 %g ms, R_max %d: admitted robots within it: %v", s.SLOMS, s.SLOP99MS, s.RMax, *s.WithinSLO)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "robot\tdevice\tcompleted\tp50 ms\tp99 ms\tmax ms\t503 after ms\terrors")
	for _, r := range s.PerRobot {
		rej := "-"
		if r.Rejected {
			rej = fmt.Sprintf("%.1f", r.RejectMS)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.1f\t%.1f\t%.1f\t%s\t%d\n", r.ID, r.Device, r.Completed, r.P50MS, r.P99MS, r.MaxMS, rej, r.Errors)
	}
	tw.Flush()
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "device\trequests\tmean batch\tmax batch")
	for _, d := range s.PerDevice {
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%d\n", d.Device, d.Requests, d.MeanBatch, d.MaxBatch)
	}
	tw.Flush()
}

// info is what the benchmark needs from the server's /info.
type info struct {
	cameras     int
	slo, sloP99 float64
	rmax        int
	idleS       float64
}

func serverInfo(url string) (info, error) {
	resp, err := http.Get(url + "/info")
	if err != nil {
		return info{}, err
	}
	defer resp.Body.Close()
	var in struct {
		Status string `json:"status"`
		Config struct {
			Cameras int `json:"PI05_NUM_IMAGES"`
		} `json:"config"`
		Megakernel struct {
			SLO struct {
				P50   float64 `json:"slo_ms"`
				P99   float64 `json:"slo_p99_ms"`
				RMax  int     `json:"r_max"`
				IdleS float64 `json:"robot_idle_s"`
			} `json:"slo"`
		} `json:"megakernel"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&in); err != nil {
		return info{}, fmt.Errorf("%s/info: %w", url, err)
	}
	if in.Status == "starting" || in.Config.Cameras == 0 {
		return info{}, fmt.Errorf("%s/info: the server is %q (want a ready pi0.5 server)", url, in.Status)
	}
	s := in.Megakernel.SLO
	return info{cameras: in.Config.Cameras, slo: s.P50, sloP99: s.P99, rmax: s.RMax, idleS: s.IdleS}, nil
}

// framePNG is one side x side frame as base64 PNG.
func framePNG(side int) (string, error) {
	img := image.NewNRGBA(image.Rect(0, 0, side, side))
	for i := range img.Pix {
		img.Pix[i] = uint8(i*7 + i/side)
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(b.Bytes()), nil
}

// requestBody is a /predict request of robot id with cameras frames and a seed per request.
func requestBody(id string, cameras int, frame string, seq int) []byte {
	imgs := make([]string, cameras)
	for i := range imgs {
		imgs[i] = frame
	}
	b, _ := json.Marshal(map[string]any{"robot_id": id, "images": imgs, "prompt": "pick up the block", "seed": seq})
	return b
}
